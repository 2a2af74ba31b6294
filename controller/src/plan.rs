//! `controller plan`: what the controller would assign, from YAML files,
//! with no cluster.
//!
//! Pure: the caller reads the files; this parses the documents, validates
//! the metallb.io objects with [`api::validate`] (status-only kinds, which
//! dumps of a cluster contain, are logged at debug and left out), and runs a [`State`]
//! over the Services the way the controller starts up (services that
//! already have `status.loadBalancer.ingress` first, then the others, each
//! group in creation order: see [`replay_order`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use api::validate::{self, Config};
use k8s_openapi::api::core::v1::{Namespace, Service as K8sService};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde::Serialize;
use serde_json::Value;
use tracing::debug;

use crate::convert;
use crate::state::{Outcome, State};

/// One input: a name for messages (a path, or `-`) and its text.
#[derive(Debug, Clone)]
pub struct Source {
    /// Where the text came from.
    pub name: String,
    /// Multi-document YAML.
    pub text: String,
}

/// Where a document is: source name and position (from 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The source's name.
    pub source: String,
    /// The document's index in it (items of a `List` count as documents
    /// of their own, after it).
    pub index: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.source, self.index)
    }
}

/// Why the inputs cannot be planned; each names the document and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A source is not YAML.
    #[error("{file}: not YAML: {message}")]
    Yaml {
        /// The source's name.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A document does not read as its kind.
    #[error("{at}: {message}")]
    Document {
        /// The document.
        at: Location,
        /// What is wrong.
        message: String,
    },
    /// Validation problems, each with its document when known.
    #[error("{}", .0.iter().map(|(at, p)| match at {
        Some(at) => format!("{at}: {p}"),
        None => p.to_string(),
    }).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<(Option<Location>, validate::Problem)>),
}

/// The plan: every Service and every pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Services by namespace/name.
    pub services: Vec<ServicePlan>,
    /// Pools by name, with MetalLB's status counters.
    pub pools: Vec<PoolPlan>,
}

/// What one Service gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicePlan {
    /// `namespace/name`.
    pub service: String,
    /// `assigned`, `pending`, `ignored` or `held`.
    pub status: &'static str,
    /// The pool, when assigned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The addresses, when assigned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// The Event reason the controller would record (MetalLB's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Why it is pending or ignored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The pool rules its addresses break, kept because it already held
    /// them (the controller logs them and records a Warning Event).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaks: Vec<String>,
}

/// One pool's counters after the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolPlan {
    /// The pool.
    pub name: String,
    /// `status.assignedIPv4` and the others, as the controller writes them.
    #[serde(flatten)]
    pub status: api::v1beta1::IPAddressPoolStatus,
}

/// The objects of some sources, as [`read`] finds them.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The metallb.io configuration objects.
    pub config: Config,
    /// The Services.
    pub services: Vec<K8sService>,
    /// The Namespaces.
    pub namespaces: Vec<Namespace>,
    /// Where each metallb.io object is, by kind and name.
    pub locations: HashMap<(&'static str, String), Location>,
    /// The metallb.io objects defined twice, each as a problem on
    /// `metadata.name` at its second place.
    pub duplicates: Vec<(Option<Location>, validate::Problem)>,
}

impl Inputs {
    /// Where the object a problem is about is, if it is one of these.
    pub fn locate(&self, p: &validate::Problem) -> Option<Location> {
        self.locations.get(&(p.kind, p.name.clone())).cloned()
    }
}

/// Reads `sources`: metallb.io objects (each checked to read as its kind,
/// not yet validated), Services and Namespaces; other kinds are skipped,
/// status-only metallb.io kinds logged at debug and left out. Items of a
/// `List` count as documents of their own.
pub fn read(sources: &[Source]) -> Result<Inputs, PlanError> {
    let mut inputs = Inputs::default();
    for src in sources {
        // Plan inputs are the operator's own files, and a dump of a large
        // cluster has far more than the parser's default 1024 documents.
        let options = serde_saphyr::options! {
            budget: serde_saphyr::budget! {
                max_documents: usize::MAX,
                max_nodes: usize::MAX,
                max_events: usize::MAX,
            },
        };
        let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(&src.text, options)
            .map_err(|e| PlanError::Yaml {
                file: src.name.clone(),
                message: e.to_string(),
            })?;
        let mut index = 0;
        let mut queue: Vec<Value> = docs.into_iter().rev().collect();
        while let Some(doc) = queue.pop() {
            let at = Location {
                source: src.name.clone(),
                index,
            };
            index += 1;
            let str_of = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or_default();
            let (api_version, kind) = (str_of("apiVersion").to_owned(), str_of("kind").to_owned());
            let bad = |message: String| PlanError::Document {
                at: at.clone(),
                message,
            };
            match (api_version.as_str(), kind.as_str()) {
                ("v1", "List") => {
                    let items = doc.get("items").and_then(Value::as_array).cloned();
                    queue.extend(items.unwrap_or_default().into_iter().rev());
                }
                ("v1", "Service") => {
                    let s: K8sService =
                        serde_json::from_value(doc).map_err(|e| bad(format!("Service: {e}")))?;
                    inputs.services.push(s);
                }
                ("v1", "Namespace") => {
                    let n: Namespace =
                        serde_json::from_value(doc).map_err(|e| bad(format!("Namespace: {e}")))?;
                    inputs.namespaces.push(n);
                }
                (v, _) if v.starts_with("metallb.io/") => {
                    let one = Config::from_yaml(&doc.to_string()).map_err(|e| {
                        // The document is alone in its text: drop the index.
                        bad(match e {
                            validate::ConfigError::Document { kind, message, .. } => {
                                format!("{kind}: {message}")
                            }
                            other => other.to_string(),
                        })
                    })?;
                    let name = doc
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    if let Some(k) = known_kind(&kind)
                        && let Some(first) = inputs.locations.insert((k, name.clone()), at.clone())
                    {
                        inputs.duplicates.push((
                            Some(at.clone()),
                            validate::Problem {
                                kind: k,
                                name,
                                field: "metadata.name".into(),
                                message: format!("defined twice, first at {first}"),
                            },
                        ));
                    }
                    for o in &one.status_only {
                        debug!(
                            at = %at,
                            kind = o.kind,
                            namespace = o.namespace.as_deref().unwrap_or_default(),
                            name = %o.name,
                            "status-only object ignored"
                        );
                    }
                    merge(&mut inputs.config, one);
                }
                _ => {}
            }
        }
    }
    Ok(inputs)
}

/// Plans `sources` for the services of `lb_class`.
pub fn plan(sources: &[Source], lb_class: Option<&str>) -> Result<Plan, PlanError> {
    let inputs = read(sources)?;
    let (model, problems) = validate::config(&inputs.config);
    if !problems.is_empty() || !inputs.duplicates.is_empty() {
        let mut all = inputs.duplicates.clone();
        all.extend(problems.into_iter().map(|p| (inputs.locate(&p), p)));
        return Err(PlanError::Invalid(all));
    }
    let Inputs {
        services,
        namespaces,
        ..
    } = inputs;

    let mut state = State::new(lb_class.map(str::to_owned));
    state.set_pools(model.pools);
    for n in &namespaces {
        state.set_namespace_labels(&n.name_any(), Some(n.labels().clone()));
    }
    let mut out = BTreeMap::new();
    for (svc, outcome) in state.replay(&replay_order(&services)) {
        out.insert(convert::key(svc).to_string(), (svc, outcome));
    }
    let services = out
        .into_iter()
        .map(|(key, (_, outcome))| service_plan(key, outcome))
        .collect();
    let pools = state
        .pool_counts()
        .into_iter()
        .map(|c| PoolPlan {
            status: c.status(),
            name: c.name,
        })
        .collect();
    Ok(Plan { services, pools })
}

/// The order in which a starting controller offers services to the
/// allocator: those with `status.loadBalancer.ingress` first, so they take
/// their addresses back before any pending service can, then the others;
/// each group in creation order (`metadata.creationTimestamp`, those
/// without one after those with one), and in input order where that does
/// not decide: the first of a file of new Services gets the first free
/// address, as it would have from a running controller.
pub fn replay_order(services: &[K8sService]) -> Vec<&K8sService> {
    replay_order_by(services, |s| {
        (&s.metadata, !convert::ingress_ips(s).is_empty())
    })
}

/// [`replay_order`] of Services in any form: `read` gives the metadata of
/// one and whether it has addresses in its status.
pub fn replay_order_by<T>(services: &[T], read: impl Fn(&T) -> (&ObjectMeta, bool)) -> Vec<&T> {
    let mut v: Vec<&T> = services.iter().collect();
    // Stable: input order breaks ties.
    v.sort_by_cached_key(|s| {
        let (meta, held) = read(s);
        let created = meta.creation_timestamp.as_ref().map(|t| t.0);
        (!held, created.is_none(), created)
    });
    v
}

/// What `controller plan` prints for a Service with this outcome (also
/// `kubectl ferrolb`'s answer for it).
pub fn service_plan(service: String, outcome: Outcome) -> ServicePlan {
    let plan = ServicePlan {
        service,
        status: "pending",
        pool: None,
        ips: Vec::new(),
        reason: None,
        message: None,
        breaks: Vec::new(),
    };
    match outcome {
        Outcome::Assigned {
            assignment, breaks, ..
        } => ServicePlan {
            status: "assigned",
            pool: Some(assignment.pool),
            ips: assignment.ips.iter().map(ToString::to_string).collect(),
            reason: Some("IPAllocated"),
            breaks,
            ..plan
        },
        Outcome::Failed(e) => ServicePlan {
            reason: Some("AllocationFailed"),
            message: Some(e.to_string()),
            ..plan
        },
        Outcome::Invalid(msg) => ServicePlan {
            reason: Some("LoadBalancerFailed"),
            message: Some(msg),
            ..plan
        },
        Outcome::NotLoadBalancer => ServicePlan {
            status: "ignored",
            message: Some("not type LoadBalancer".into()),
            ..plan
        },
        Outcome::Held => ServicePlan {
            status: "held",
            message: Some(
                "its addresses are in no pool in force while a pool object is invalid".into(),
            ),
            ..plan
        },
        Outcome::OtherClass(c) => ServicePlan {
            status: "ignored",
            message: Some(match c {
                Some(c) => format!("loadBalancerClass {c:?} is not ours"),
                None => "no loadBalancerClass, and we serve only ours".into(),
            }),
            ..plan
        },
    }
}

/// The `&'static str` kind names that [`validate::Problem`] uses.
fn known_kind(kind: &str) -> Option<&'static str> {
    [
        "IPAddressPool",
        "BGPPeer",
        "BGPAdvertisement",
        "L2Advertisement",
        "BFDProfile",
        "Community",
    ]
    .into_iter()
    .find(|k| *k == kind)
}

fn merge(into: &mut Config, from: Config) {
    into.pools.extend(from.pools);
    into.peers.extend(from.peers);
    into.bgp_advertisements.extend(from.bgp_advertisements);
    into.l2_advertisements.extend(from.l2_advertisements);
    into.bfd_profiles.extend(from.bfd_profiles);
    into.communities.extend(from.communities);
    into.status_only.extend(from.status_only);
}
