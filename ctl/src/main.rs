//! `kubectl-ferrolb`: the kubectl plugin. Put it on the `PATH` and run
//! `kubectl ferrolb status` or `kubectl ferrolb explain svc/NAME`.
//!
//! This file is the glue: flags, the client, listing, printing. The
//! reports are the library's ([`kubectl_ferrolb::status`],
//! [`kubectl_ferrolb::explain`]).

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use api::model::ObjectKey;
use api::validate;
use clap::{Parser, Subcommand, ValueEnum};
use controller::plan::{self, Source};
use kube::Client;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};
use kubectl_ferrolb::cluster::{Snapshot, service_events};
use kubectl_ferrolb::{Settings, diff, explain, status};
use serde::Serialize;

/// What ferrolb does in this cluster, and why. Reads only: it lists the
/// metallb.io objects, Nodes, Services, EndpointSlices, the speaker Pods,
/// the status objects and Events, and runs the controller's and the
/// speakers' own decisions over them.
#[derive(Debug, Parser)]
#[command(name = "kubectl-ferrolb", bin_name = "kubectl ferrolb", version)]
struct Cli {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else
    /// the in-cluster service account).
    #[arg(long, global = true, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true)]
    context: Option<String>,
    /// The namespace: of the Service for `explain`, and of the Services
    /// without one in `diff`'s files (default: the context's, else
    /// `default`); for `status`, show only the pending Services of this
    /// namespace (default: all).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// Output format (`migrate-configmap` always prints YAML manifests).
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Namespace of the metallb.io objects and the speaker Pods (the
    /// programs' METALLB_NAMESPACE); `migrate-configmap` puts its objects
    /// there.
    #[arg(
        long,
        global = true,
        env = "METALLB_NAMESPACE",
        default_value = "metallb-system"
    )]
    metallb_namespace: String,
    /// The loadBalancerClass the controller and the speakers serve (their
    /// --lb-class); default: Services without a class.
    #[arg(long, global = true)]
    lb_class: Option<String>,
    /// Label selector of the speaker Pods (the speaker's
    /// --memberlist-labels). Their Ready condition stands for the
    /// memberlist members in the layer 2 election.
    #[arg(long, global = true, default_value = "app=metallb,component=speaker")]
    speaker_labels: String,
    /// The speakers run with --ignore-exclude-lb: nodes labelled
    /// node.kubernetes.io/exclude-from-external-load-balancers announce
    /// anyway.
    #[arg(long, global = true)]
    ignore_exclude_lb: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every IPAddressPool's addresses (used/total per family), the
    /// LoadBalancer Services still without an address and why (the
    /// controller's answer and its last Event), and per node: the speaker
    /// Pod, its ConfigurationState, the IPs it answers for in layer 2 and
    /// the BGP peers it announces to.
    Status,
    /// The story of one Service: the pools the controller considers and
    /// why each is or is not chosen, its IPs, and for every node whether
    /// it may announce them and why not (BGP routes per peer, the layer 2
    /// election), what the speakers report, and its last Events.
    Explain {
        /// The Service: `svc/NAME`, `service/NAME` or `NAME`.
        service: String,
    },
    /// What would change in IP assignments and announcements if these
    /// objects were applied.
    ///
    /// The Services that would gain, lose or move an address or change
    /// pool (the controller's own decisions, which keep an address a
    /// Service holds wherever they can), the nodes that would start or
    /// stop sending a Service's routes to a BGP peer or answering for it
    /// in layer 2 (each speaker's decisions), and the configuration
    /// problems the objects would bring, each naming its field. An object
    /// replaces the live one of the same kind, namespace and name; nothing
    /// is written. Exit status: 0 when nothing moves, 1 when something
    /// does (or the objects bring a problem), 2 on an error.
    #[command(after_help = "Examples:\n  \
        kubectl ferrolb diff -f pools.yaml -f l2.yaml\n  \
        kubectl ferrolb diff -f pool.yaml && kubectl apply -f pool.yaml   # only if nothing moves")]
    Diff {
        /// Multi-document YAML with metallb.io objects, Services and
        /// Namespaces (their labels select pools); `-` reads standard
        /// input. May be repeated. Other kinds are skipped. A Service
        /// without a namespace is in -n's (default: the context's).
        #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
        files: Vec<String>,
    },
    /// MetalLB's legacy ConfigMap configuration as metallb.io objects.
    ///
    /// The `config` key of the metallb-system/config ConfigMap (MetalLB
    /// before 0.13) becomes BGPPeers, IPAddressPools, BGPAdvertisements,
    /// L2Advertisements, BFDProfiles and a Community, named and mapped as
    /// MetalLB's own converter did, printed as YAML in the namespace
    /// --metallb-namespace. Reads no cluster. An unknown key is an error
    /// naming it; the objects are validated as ferrolb validates them
    /// before they are printed.
    #[command(
        name = "migrate-configmap",
        after_help = "Example:\n  \
        kubectl get configmap -n metallb-system config -o yaml \\\n    \
        | kubectl ferrolb migrate-configmap -f - | kubectl apply -f -"
    )]
    MigrateConfigmap {
        /// The ConfigMap manifest, or the bare configuration YAML (its
        /// `config` key); `-` reads standard input.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: String,
    },
}

/// How a report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Columns and short lines, for a person.
    Table,
    /// The whole report as JSON.
    Json,
    /// The whole report as YAML.
    Yaml,
}

/// The exit status of an error (clap's for a usage error is 2 too).
const ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::MigrateConfigmap { file } = &cli.command {
        return match migrate(file, &cli.metallb_namespace) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kubectl ferrolb: {e}");
                ExitCode::from(ERROR)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubectl ferrolb: {e}");
            return ExitCode::from(ERROR);
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok((text, status)) => {
            print!("{text}");
            ExitCode::from(status)
        }
        Err(e) => {
            eprintln!("kubectl ferrolb: {e}");
            ExitCode::from(ERROR)
        }
    }
}

/// `migrate-configmap`: the file's objects as YAML.
fn migrate(file: &str, namespace: &str) -> Result<String, String> {
    let source = read_source(file)?;
    let cfg = api::legacy::convert(&source.text, namespace).map_err(|e| format!("{file}: {e}"))?;
    api::legacy::to_yaml(&cfg).map_err(|e| e.to_string())
}

/// A file's text, or standard input's for `-`.
fn read_source(file: &str) -> Result<Source, String> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("standard input: {e}"))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?
    };
    Ok(Source {
        name: file.to_owned(),
        text,
    })
}

/// Runs a command against the cluster: its output and exit status.
async fn run(cli: &Cli) -> Result<(String, u8), String> {
    // The files first: a bad one needs no cluster to be told.
    let inputs = match &cli.command {
        Command::Diff { files } => {
            let sources = files
                .iter()
                .map(|f| read_source(f))
                .collect::<Result<Vec<_>, _>>()?;
            Some(plan::read(&sources).map_err(|e| e.to_string())?)
        }
        _ => None,
    };
    let config = client_config(cli).await?;
    let default_namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| e.to_string())?;
    let settings = Settings {
        metallb_namespace: cli.metallb_namespace.clone(),
        lb_class: cli.lb_class.clone(),
        speaker_labels: cli.speaker_labels.clone(),
        ignore_exclude_lb: cli.ignore_exclude_lb,
    };
    let mut snap = Snapshot::read(&client, &settings)
        .await
        .map_err(|e| e.to_string())?;
    match &cli.command {
        Command::Status => {
            let mut report = status::build(&snap, &settings, cli.namespace.as_deref());
            for (ns, name) in report.pending_keys() {
                let (events, _) = service_events(&client, &ns, &name)
                    .await
                    .map_err(|e| e.to_string())?;
                report.attach(&format!("{ns}/{name}"), &events);
            }
            render(cli.output, &report, status::Status::table).map(|t| (t, 0))
        }
        Command::Explain { service } => {
            let name = service_name(service)?;
            let namespace = cli.namespace.clone().unwrap_or(default_namespace);
            let key = ObjectKey::new(namespace, name);
            let (events, note) = service_events(&client, &key.namespace, &key.name)
                .await
                .map_err(|e| e.to_string())?;
            let mut report = explain::build(&snap, &settings, &key, &events).map_err(|e| e.0)?;
            report.notes.extend(note);
            render(cli.output, &report, explain::Explain::table).map(|t| (t, 0))
        }
        Command::Diff { .. } => {
            let inputs = inputs.unwrap_or_default();
            // The Secrets the new BGPPeers name.
            let (model, _) = validate::config(&inputs.config);
            snap.read_secrets(&client, &settings, &model)
                .await
                .map_err(|e| e.to_string())?;
            let namespace = cli.namespace.clone().unwrap_or(default_namespace);
            let report = diff::build(&snap, &settings, &inputs, &namespace);
            let status = u8::from(report.moves());
            render(cli.output, &report, diff::Diff::table).map(|t| (t, status))
        }
        Command::MigrateConfigmap { .. } => Err("migrate-configmap reads no cluster".into()),
    }
}

/// The client configuration: --kubeconfig (with --context), else
/// $KUBECONFIG or ~/.kube/config (with --context), else whatever kube
/// infers (the kubeconfig, then the in-cluster service account).
async fn client_config(cli: &Cli) -> Result<Config, String> {
    let options = KubeConfigOptions {
        context: cli.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match (&cli.kubeconfig, &cli.context) {
        (Some(path), _) => {
            let file =
                Kubeconfig::read_from(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| e.to_string())?
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string())?,
        (None, None) => Config::infer().await.map_err(|e| e.to_string())?,
    };
    Ok(config)
}

/// `svc/NAME`, `service/NAME`, `services/NAME` or `NAME`.
fn service_name(arg: &str) -> Result<String, String> {
    let name = match arg.split_once('/') {
        Some(("svc" | "service" | "services", name)) => name,
        Some((kind, _)) => {
            return Err(format!("explain takes a Service (svc/NAME), not {kind:?}"));
        }
        None => arg,
    };
    if name.is_empty() {
        return Err("explain: the Service has no name".into());
    }
    Ok(name.to_owned())
}

fn render<T: Serialize>(
    format: Format,
    report: &T,
    table: fn(&T) -> String,
) -> Result<String, String> {
    match format {
        Format::Table => Ok(table(report)),
        Format::Json => serde_json::to_string_pretty(report)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| e.to_string()),
        Format::Yaml => serde_saphyr::to_string(report).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_is_named_as_kubectl_names_it() {
        for arg in ["svc/web", "service/web", "services/web", "web"] {
            assert_eq!(service_name(arg).as_deref(), Ok("web"), "{arg}");
        }
        assert!(service_name("deploy/web").is_err());
        assert!(service_name("svc/").is_err());
    }

    #[test]
    fn every_flag_has_help() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        for sub in std::iter::once(&cmd).chain(cmd.get_subcommands()) {
            for arg in sub.get_arguments() {
                assert!(
                    arg.get_help().is_some() || arg.get_long_help().is_some(),
                    "{} --{} has no help",
                    sub.get_name(),
                    arg.get_id()
                );
            }
        }
    }
}
