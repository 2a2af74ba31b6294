//! The file source (standalone mode, no Kubernetes): a directory of YAML
//! files, each with any number of documents, read as `kubectl apply -f DIR`
//! would read them.
//!
//! Kinds read: the metallb.io CRDs (through [`Config::from_yaml`]; the
//! status-only ServiceL2Status, ServiceBGPStatus and ConfigurationState
//! are logged at debug and left out), and
//! `v1` Node, Service (with `status.loadBalancer.ingress`), Secret and
//! `discovery.k8s.io/v1` EndpointSlice (the last three read as the
//! Kubernetes source reads them, [`watched`]: only the fields the speaker
//! uses). Other kinds are skipped. Namespaced
//! objects without a namespace are in `default`, as `kubectl apply` puts
//! them.
//!
//! [`load`] is the parse (text in, [`Snapshot`] or every error out);
//! [`watch`] polls the directory and sends each changed result.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use api::validate::{self, Config, ConfigError, Problem};
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::debug;

use super::{Rejected, Reload, Shared, Snapshot, trim_secret};
use crate::announce::stored::{self, Holds};
use crate::announce::watched::{self, Interner};

/// Why a directory's contents cannot be used. The last good snapshot stays
/// in force.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory or a file could not be read.
    #[error("{path}: {error}")]
    Io {
        /// What could not be read.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// A file is not YAML, or a metallb.io document does not match its
    /// kind.
    #[error("{path}: {error}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: ConfigError,
    },
    /// A Kubernetes document does not match its kind.
    #[error("{path}: document {index} ({kind}): {message}")]
    Document {
        /// The file.
        path: PathBuf,
        /// Position of the document in the file, from 0.
        index: usize,
        /// Its kind.
        kind: String,
        /// The deserialization error.
        message: String,
    },
    /// The metallb.io objects are inconsistent (validation).
    #[error("{0}")]
    Invalid(Problem),
}

/// The files of a directory, by name, with their contents: what [`load`]
/// parses and what [`watch`] compares.
pub type Files = BTreeMap<PathBuf, String>;

/// Reads the YAML files of `dir` (`*.yaml`, `*.yml`, `*.json`; hidden
/// files and directories skipped, so a mounted ConfigMap's `..data` is not
/// read twice; symlinks followed).
pub fn read_dir(dir: &Path) -> Result<Files, Error> {
    let io_err = |path: &Path, error| Error::Io {
        path: path.to_owned(),
        error,
    };
    let mut files = Files::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let path = entry.map_err(|e| io_err(dir, e))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let yaml = [".yaml", ".yml", ".json"].iter().any(|x| name.ends_with(x));
        if name.starts_with('.') || !yaml || !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
        files.insert(path, text);
    }
    Ok(files)
}

/// Parses the files and validates the metallb.io objects together.
/// Returns every error found, not just the first.
pub fn load(files: &Files) -> Result<Snapshot, Rejected> {
    let mut objects = Objects::default();
    let mut config = Config::default();
    let mut errors = Vec::new();
    for (path, text) in files {
        if let Err(e) = load_file(&mut config, &mut objects, path, text) {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        // Some objects may be missing: nothing of this read is used.
        return Err(Rejected {
            errors,
            cluster: None,
        });
    }
    default_namespaces(&mut config, &mut objects);
    // Kept as the Kubernetes source keeps them: records, strings shared.
    let mut interner = Interner::default();
    let mut snap = Snapshot {
        model: Arc::default(),
        nodes: records(objects.nodes, &mut interner, stored::Node::from_watched),
        services: records(
            objects.services,
            &mut interner,
            stored::Service::from_watched,
        ),
        slices: records(
            objects.slices,
            &mut interner,
            stored::EndpointSlice::from_watched,
        ),
        secrets: objects.secrets.into(),
    };
    let (model, problems) = validate::config(&config);
    if !problems.is_empty() {
        // Every object was read; only the configuration is refused.
        return Err(Rejected {
            errors: problems.into_iter().map(Error::Invalid).collect(),
            cluster: Some(Box::new(snap)),
        });
    }
    snap.model = Arc::new(model);
    Ok(snap)
}

/// Polls `dir` every `interval` and sends the result of [`load`] whenever
/// the files change (the first time at once). Stops when the receiver is
/// gone.
pub async fn watch(dir: PathBuf, interval: Duration, tx: mpsc::Sender<Reload>) {
    // Contents, not mtimes, are compared: an edit within the mtime's
    // granularity is still seen, and a touch without change is not a
    // reload. Configurations are small.
    let mut last: Option<Result<Files, String>> = None;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (seen, result) = match read_dir(&dir) {
            Ok(files) => {
                let result = load(&files);
                (Ok(files), result)
            }
            Err(e) => (
                Err(e.to_string()),
                Err(Rejected {
                    errors: vec![e],
                    cluster: None,
                }),
            ),
        };
        if last.as_ref() == Some(&seen) {
            continue;
        }
        debug!(dir = %dir.display(), "configuration changed");
        last = Some(seen);
        if tx.send(result).await.is_err() {
            return;
        }
    }
}

/// The Kubernetes objects of the files, as they are read.
#[derive(Default)]
struct Objects {
    nodes: Vec<watched::Node>,
    services: Vec<watched::Service>,
    slices: Vec<watched::EndpointSlice>,
    secrets: Vec<Arc<corev1::Secret>>,
}

/// The records of `objects`, in their order.
fn records<W, T: Holds>(
    objects: Vec<W>,
    interner: &mut Interner,
    record: impl Fn(W, &mut Interner) -> T,
) -> Shared<T> {
    objects
        .into_iter()
        .map(|o| record(o, interner).hold())
        .collect()
}

fn load_file(c: &mut Config, snap: &mut Objects, path: &Path, text: &str) -> Result<(), Error> {
    let config = Config::from_yaml(text).map_err(|error| Error::Config {
        path: path.to_owned(),
        error,
    })?;
    c.pools.extend(config.pools);
    c.peers.extend(config.peers);
    c.bgp_advertisements.extend(config.bgp_advertisements);
    c.l2_advertisements.extend(config.l2_advertisements);
    c.bfd_profiles.extend(config.bfd_profiles);
    c.communities.extend(config.communities);
    for o in config.status_only {
        debug!(
            path = %path.display(),
            index = o.index,
            kind = o.kind,
            namespace = o.namespace.as_deref().unwrap_or_default(),
            name = %o.name,
            "status-only object ignored"
        );
    }
    // `from_yaml` has read it as YAML already; this cannot fail differently.
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| Error::Config {
        path: path.to_owned(),
        error: ConfigError::Yaml(e.to_string()),
    })?;
    for (index, doc) in docs.into_iter().enumerate() {
        let text_of = |key: &str| doc.get(key).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (text_of("apiVersion").to_owned(), text_of("kind").to_owned());
        let bad = |e: serde_json::Error| Error::Document {
            path: path.to_owned(),
            index,
            kind: kind.clone(),
            message: e.to_string(),
        };
        match (api_version.as_str(), kind.as_str()) {
            ("v1", "Node") => snap.nodes.push(serde_json::from_value(doc).map_err(bad)?),
            ("v1", "Service") => snap
                .services
                .push(serde_json::from_value(doc).map_err(bad)?),
            ("v1", "Secret") => {
                let mut secret = serde_json::from_value(doc).map_err(bad)?;
                trim_secret(&mut secret);
                snap.secrets.push(Arc::new(secret));
            }
            ("discovery.k8s.io/v1", "EndpointSlice") => {
                snap.slices.push(serde_json::from_value(doc).map_err(bad)?);
            }
            _ => {}
        }
    }
    Ok(())
}

fn default_namespaces(c: &mut Config, snap: &mut Objects) {
    fn set(meta: &mut ObjectMeta) {
        if meta.namespace.as_deref().is_none_or(str::is_empty) {
            meta.namespace = Some(DEFAULT_NAMESPACE.to_owned());
        }
    }
    c.pools.iter_mut().for_each(|o| set(&mut o.metadata));
    c.peers.iter_mut().for_each(|o| set(&mut o.metadata));
    c.bgp_advertisements
        .iter_mut()
        .for_each(|o| set(&mut o.metadata));
    c.l2_advertisements
        .iter_mut()
        .for_each(|o| set(&mut o.metadata));
    c.bfd_profiles.iter_mut().for_each(|o| set(&mut o.metadata));
    c.communities.iter_mut().for_each(|o| set(&mut o.metadata));
    snap.services.iter_mut().for_each(|o| set(&mut o.metadata));
    snap.slices.iter_mut().for_each(|o| set(&mut o.metadata));
    // Just parsed: each Arc is unique, make_mut does not copy.
    snap.secrets
        .iter_mut()
        .for_each(|o| set(&mut Arc::make_mut(o).metadata));
}

const DEFAULT_NAMESPACE: &str = "default";

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str)]) -> Files {
        entries
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect()
    }

    const POOL: &str = "
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec: {addresses: [192.0.2.0/24]}
";

    const SERVICE: &str = "
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {type: LoadBalancer, externalTrafficPolicy: Local}
status: {loadBalancer: {ingress: [{ip: 192.0.2.10}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.244.0.5], nodeName: n2}]
---
apiVersion: v1
kind: Node
metadata: {name: n2}
---
apiVersion: v1
kind: Secret
metadata: {name: auth, namespace: metallb-system}
stringData: {password: s3cret}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: skipped}
";

    #[test]
    fn reads_every_kind_across_files() {
        let snap = load(&files(&[("a.yaml", POOL), ("b.yaml", SERVICE)])).unwrap();
        assert_eq!(snap.model.pools.len(), 1);
        assert_eq!(snap.nodes.len(), 1);
        assert_eq!(snap.secrets.len(), 1);
        assert_eq!(&*snap.services[0].key.namespace, "default");
        // The slice joins the service (same defaulted namespace).
        let (view, problems) = crate::announce::ClusterView::from_k8s(
            "n2",
            snap.model,
            &snap.nodes,
            &snap.services,
            &snap.slices,
            &snap.secrets,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(view.services[0].has_serving_endpoint_on("n2"));
    }

    /// A backup made with `kubectl get -o yaml` holds MetalLB's
    /// status-only objects: they are read past, not refused.
    #[test]
    fn status_only_objects_are_left_out() {
        const STATUSES: &str = "
apiVersion: metallb.io/v1beta1
kind: ServiceL2Status
metadata: {name: l2-abcde, namespace: metallb-system}
spec: {}
status: {node: n2, serviceName: web, serviceNamespace: default}
---
apiVersion: metallb.io/v1beta1
kind: ServiceBGPStatus
metadata: {name: bgp-fghij, namespace: metallb-system}
status: {node: n2, serviceName: web, serviceNamespace: default, peers: [p]}
---
apiVersion: metallb.io/v1beta1
kind: ConfigurationState
metadata: {name: controller, namespace: metallb-system}
status: {result: Valid}
";
        let with = load(&files(&[
            ("a.yaml", POOL),
            ("b.yaml", SERVICE),
            ("c.yaml", STATUSES),
        ]))
        .unwrap();
        let without = load(&files(&[("a.yaml", POOL), ("b.yaml", SERVICE)])).unwrap();
        assert_eq!(with.model, without.model);
        assert_eq!(with.model.pools.len(), 1);
        assert_eq!(with.services.len(), 1);
    }

    #[test]
    fn every_error_names_file_and_object() {
        let bad_pool = POOL.replace("192.0.2.0/24", "192.0.2.0/33");
        let Rejected { errors, cluster } = load(&files(&[
            ("a.yaml", &bad_pool),
            ("b.yaml", "kind: [unclosed"),
            ("c.yaml", "apiVersion: v1\nkind: Service\nspec: 7\n"),
        ]))
        .unwrap_err();
        assert!(cluster.is_none(), "objects may be missing");
        // Parse errors first: validation runs only on what parsed.
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].to_string().starts_with("b.yaml: not YAML"));
        assert!(
            errors[1]
                .to_string()
                .starts_with("c.yaml: document 0 (Service)"),
            "{}",
            errors[1]
        );
        let errors = load(&files(&[("a.yaml", &bad_pool)])).unwrap_err().errors;
        let text = errors[0].to_string();
        assert!(
            text.contains("IPAddressPool \"pool\": spec.addresses[0]"),
            "{text}"
        );
    }

    /// One bad metallb.io object (issue 14, finding 2): the configuration
    /// is refused, and the cluster objects read beside it come back whole,
    /// so the speaker keeps acting on them with its last good
    /// configuration.
    #[test]
    fn a_refused_configuration_comes_with_the_cluster_objects() {
        let overlap = POOL.replace("name: pool", "name: overlap");
        let reversed = POOL
            .replace("name: pool", "name: reversed")
            .replace("192.0.2.0/24", "198.51.100.9-198.51.100.1");
        for (bad, field) in [
            (&overlap, "spec.addresses"),
            (&reversed, "spec.addresses[0]"),
        ] {
            let rejected = load(&files(&[
                ("a.yaml", POOL),
                ("b.yaml", SERVICE),
                ("c.yaml", bad),
            ]))
            .unwrap_err();
            let text = rejected.errors[0].to_string();
            assert!(text.contains(field), "{text}");
            let cluster = rejected.cluster.expect("every object was read");
            assert_eq!(cluster.services.len(), 1);
            assert_eq!((cluster.nodes.len(), cluster.slices.len()), (1, 1));
            assert!(
                cluster.model.pools.is_empty(),
                "no model of a refused configuration"
            );
            let last = load(&files(&[("a.yaml", POOL)])).unwrap();
            let now = last.with_cluster(*cluster);
            assert_eq!(now.model, last.model);
            assert_eq!(now.services.len(), 1);
        }
    }

    #[test]
    fn reads_a_directory() {
        let dir = std::env::temp_dir().join(format!("ferrolb-file-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("..data")).unwrap();
        std::fs::write(dir.join("pool.yaml"), POOL).unwrap();
        std::fs::write(dir.join("notes.txt"), "not read").unwrap();
        std::fs::write(dir.join(".hidden.yaml"), "not: read").unwrap();
        let files = read_dir(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files.len(), 1);
        assert!(read_dir(&dir).is_err());
    }
}
