//! Reads the cluster: the one module that calls the API server, and only
//! to list and get. What it may not read (a role without access to Pods,
//! Secrets, Events or the status kinds) becomes a note in the snapshot and
//! an empty list, so a report still shows the rest.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::model::{Model, ObjectKey, PasswordSource};
use api::v1beta1::{
    BFDProfile, BGPAdvertisement, Community, ConfigurationState, IPAddressPool, L2Advertisement,
    ServiceBGPStatus, ServiceL2Status,
};
use api::v1beta2::BGPPeer;
use api::validate::{self, Config, Problem};
use controller::state::{Outcome, State};
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use speaker::announce::ClusterView;
use speaker::announce::{stored, watched};
use speaker::source::k8s::{SpeakerPods, speaker_pods};

use crate::Settings;

/// Everything the reports read, listed once.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The metallb.io configuration objects of the MetalLB namespace.
    pub config: Config,
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Namespaces (their labels select pools).
    pub namespaces: Vec<Namespace>,
    /// Services of every namespace.
    pub services: Vec<Service>,
    /// EndpointSlices of every namespace.
    pub slices: Vec<EndpointSlice>,
    /// The Secrets BGPPeers name in `passwordSecret`.
    pub secrets: Vec<Secret>,
    /// The speaker Pods.
    pub pods: Vec<Pod>,
    /// The speakers' ServiceL2Status objects.
    pub l2_statuses: Vec<ServiceL2Status>,
    /// The speakers' ServiceBGPStatus objects.
    pub bgp_statuses: Vec<ServiceBGPStatus>,
    /// The programs' ConfigurationState objects.
    pub states: Vec<ConfigurationState>,
    /// What could not be read, and what that leaves out.
    pub notes: Vec<String>,
}

impl Snapshot {
    /// Lists every object the reports read.
    pub async fn read(client: &Client, settings: &Settings) -> Result<Self, kube::Error> {
        let ns = settings.metallb_namespace.as_str();
        let config = Config {
            pools: list(Api::<IPAddressPool>::namespaced(client.clone(), ns)).await?,
            peers: list(Api::<BGPPeer>::namespaced(client.clone(), ns)).await?,
            bgp_advertisements: list(Api::<BGPAdvertisement>::namespaced(client.clone(), ns))
                .await?,
            l2_advertisements: list(Api::<L2Advertisement>::namespaced(client.clone(), ns)).await?,
            bfd_profiles: list(Api::<BFDProfile>::namespaced(client.clone(), ns)).await?,
            communities: list(Api::<Community>::namespaced(client.clone(), ns)).await?,
            status_only: Vec::new(),
        };
        let mut snap = Self {
            config,
            nodes: list(Api::all(client.clone())).await?,
            namespaces: list(Api::all(client.clone())).await?,
            services: list(Api::all(client.clone())).await?,
            slices: list(Api::all(client.clone())).await?,
            ..Self::default()
        };
        let mut notes = Vec::new();
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let params = ListParams::default().labels(&settings.speaker_labels);
        snap.pods = match pods.list(&params).await {
            Ok(l) => sorted(l.items),
            Err(e) if forbidden(&e) => {
                notes.push(format!(
                    "cannot list Pods in {ns} (forbidden): every node is taken to run a speaker"
                ));
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        snap.l2_statuses = optional(Api::namespaced(client.clone(), ns), &mut notes).await?;
        snap.bgp_statuses = optional(Api::namespaced(client.clone(), ns), &mut notes).await?;
        snap.states = optional(Api::namespaced(client.clone(), ns), &mut notes).await?;
        snap.notes = notes;
        let (model, _) = validate::config(&snap.config);
        snap.read_secrets(client, settings, &model).await?;
        Ok(snap)
    }

    /// Reads the Secrets that the BGPPeers of `model` name in
    /// `passwordSecret` and that are not read yet (a note for each that
    /// may not be read).
    pub async fn read_secrets(
        &mut self,
        client: &Client,
        settings: &Settings,
        model: &Model,
    ) -> Result<(), kube::Error> {
        let ns = settings.metallb_namespace.as_str();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        for key in password_secrets(model) {
            let read = self.secrets.iter().any(|s| {
                s.metadata.name.as_deref() == Some(&*key.name)
                    && s.metadata.namespace.as_deref() == Some(&*key.namespace)
            });
            if &*key.namespace != ns || read {
                continue;
            }
            match secrets.get_opt(&key.name).await {
                Ok(Some(s)) => self.secrets.push(s),
                Ok(None) => {}
                Err(e) if forbidden(&e) => self.notes.push(format!(
                    "cannot read Secret {key} (forbidden): BGPPeers that use it show as unusable"
                )),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The configuration as the programs parse it, and its problems.
    pub fn model(&self) -> (Arc<Model>, Vec<Problem>) {
        let (model, problems) = validate::config(&self.config);
        (Arc::new(model), problems)
    }

    /// The controller's answer: its state after the startup replay over
    /// these objects ([`State::start`]), and each Service's outcome.
    pub fn controller(&self, settings: &Settings) -> (State, Vec<(&Service, Outcome)>) {
        let (state, outcomes, _) = State::start(
            settings.lb_class.clone(),
            &self.config.pools,
            &self.namespaces,
            &self.services,
        );
        (state, outcomes)
    }

    /// What the speaker Pods tell, as the speakers read them.
    pub fn speakers(&self) -> SpeakerPods {
        let pods: Vec<Arc<Pod>> = self.pods.iter().cloned().map(Arc::new).collect();
        speaker_pods(&pods)
    }

    /// The nodes that have a live speaker Pod (Ready or not).
    pub fn speaker_nodes(&self) -> BTreeSet<String> {
        self.pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect()
    }

    /// The view the speaker on `node` decides from. Its memberlist
    /// members are taken to be the nodes whose speaker Pod is Ready (what
    /// the API shows of memberlist); with no speaker Pod listed at all,
    /// every node, as the speaker assumes without memberlist.
    pub fn view(
        &self,
        node: &str,
        model: Arc<Model>,
        settings: &Settings,
        speakers: &SpeakerPods,
    ) -> ClusterView {
        // The speaker reads only some fields of these kinds (its own
        // types), and keeps them as records.
        let nodes: Vec<stored::Node> = self
            .nodes
            .iter()
            .map(|n| watched::Node::from(n).into())
            .collect();
        let services: Vec<stored::Service> = self
            .services
            .iter()
            .map(|s| watched::Service::from(s).into())
            .collect();
        let slices: Vec<stored::EndpointSlice> = self
            .slices
            .iter()
            .map(|e| watched::EndpointSlice::from(e).into())
            .collect();
        let (mut view, _) =
            ClusterView::from_k8s(node, model, &nodes, &services, &slices, &self.secrets);
        if !self.pods.is_empty() {
            view.members = Some(speakers.ready.clone());
        }
        view.load_balancer_class.clone_from(&settings.lb_class);
        view.ignore_exclude_lb = settings.ignore_exclude_lb;
        view
    }

    /// By service, the nodes whose ServiceL2Status says they answer for it.
    pub fn l2_announcers(&self) -> BTreeMap<ObjectKey, BTreeSet<String>> {
        speaker::source::k8s::l2_announcers(&self.l2_statuses)
    }
}

/// The Events about one Service, oldest first (core/v1, which also shows
/// the `events.k8s.io` ones), and a note when they may not be read.
pub async fn service_events(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(Vec<Event>, Option<String>), kube::Error> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=Service,involvedObject.name={name}"
    ));
    match api.list(&params).await {
        Ok(l) => {
            let mut items = l.items;
            items.sort_by_key(event_time);
            Ok((items, None))
        }
        Err(e) if forbidden(&e) => Ok((
            Vec::new(),
            Some(format!("cannot list Events in {namespace} (forbidden)")),
        )),
        Err(e) => Err(e),
    }
}

/// When an Event last happened: its last timestamp, series, event time,
/// first timestamp or creation, the first set.
pub fn event_time(e: &Event) -> Option<k8s_openapi::jiff::Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.series.as_ref()?.last_observed_time.as_ref().map(|t| t.0))
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The Secrets the peers' `passwordSecret`s name.
fn password_secrets(model: &Model) -> BTreeSet<ObjectKey> {
    model
        .peers
        .iter()
        .filter_map(|p| match &p.password {
            Some(PasswordSource::Secret(key)) => Some(key.clone()),
            _ => None,
        })
        .collect()
}

async fn list<K>(api: Api<K>) -> Result<Vec<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(sorted(api.list(&ListParams::default()).await?.items))
}

/// A list that a role may not grant: forbidden is a note, not an error.
async fn optional<K>(api: Api<K>, notes: &mut Vec<String>) -> Result<Vec<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    match list(api).await {
        Ok(items) => Ok(items),
        Err(e) if forbidden(&e) => {
            notes.push(format!("cannot list {} (forbidden)", K::plural(&())));
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    }
}

/// By namespace and name, as the speaker's caches order them.
fn sorted<K: Resource>(mut items: Vec<K>) -> Vec<K> {
    items.sort_by(|a, b| {
        (a.meta().namespace.as_deref(), a.meta().name.as_deref())
            .cmp(&(b.meta().namespace.as_deref(), b.meta().name.as_deref()))
    });
    items
}

fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}
