//! Tells Kubernetes what this node does, as MetalLB's speaker does:
//!
//! - one `ServiceL2Status` per service this node answers for in layer 2
//!   mode, and one `ServiceBGPStatus` per service it advertises over BGP,
//!   in the speaker's namespace, named `l2-*` / `bgp-*` (generated), labelled
//!   `metallb.io/node`, `metallb.io/service-name`,
//!   `metallb.io/service-namespace`, owned by the speaker Pod when its name
//!   and UID are known (so they go with it); objects this node no longer
//!   backs are deleted;
//! - a `nodeAssigned` event on a Service when this node starts announcing
//!   it with a protocol ("announcing from node X with protocol Y"), only on
//!   that change;
//! - a `ConfigurationState` named `speaker-<node>` with the result of the
//!   last configuration (Valid, or Invalid with the problems).
//!
//! The reconcile loop sends a [`Report`] on a watch channel after every
//! change; this task writes the difference. On an API error it waits and
//! lists again, so nothing is lost and the loop is never blocked.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use api::v1beta1::{ConfigurationState, ServiceBGPStatus, ServiceL2Status};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, Resource};
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::announce::status::{ServiceAnnouncement, changed, newly_assigned};
use crate::announce::stored::Service;
use crate::announce::{Announcements, ObjectKey};
use crate::source::store::Store;

/// What the reconcile loop reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// What this node announces; `None` until the first reconcile.
    /// One copy, shared by the watch channel, the writer's report and
    /// what it last wrote from (three deep copies of a thousand services'
    /// announcements before), and the keyed plan itself: the reconcile
    /// loop hands over the plan's `Arc` after the routes are handed to the
    /// peers, and the plan copies the map (once) only when a later update
    /// changes it while this report still holds it.
    pub announcements: Option<Arc<Announcements>>,
    /// The result of the last configuration.
    pub config: ConfigResult,
}

/// The result of the last configuration, for `ConfigurationState`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ConfigResult {
    /// Nothing loaded yet.
    #[default]
    Unknown,
    /// Accepted.
    Valid,
    /// Rejected (the last good one stays in force), with the problems.
    Invalid(String),
}

/// Where the writer works.
#[derive(Clone, Debug)]
pub struct Options {
    /// This node.
    pub node: String,
    /// The speaker's namespace (where the status objects live).
    pub namespace: String,
    /// The speaker Pod, owner of the status objects: (name, uid).
    pub pod: Option<(String, String)>,
}

/// The labels MetalLB puts on status objects.
pub const LABEL_NODE: &str = "metallb.io/node";
/// See [`LABEL_NODE`].
pub const LABEL_SERVICE_NAME: &str = "metallb.io/service-name";
/// See [`LABEL_NODE`].
pub const LABEL_SERVICE_NAMESPACE: &str = "metallb.io/service-namespace";

/// Writes every [`Report`] from `reports` until the sender is gone.
/// `services` is the Service cache (events name the Service's UID).
pub async fn run(
    client: Client,
    opts: Options,
    services: Store<Service>,
    mut reports: watch::Receiver<Report>,
) {
    let mut w = Writer {
        l2: Kind::new::<ServiceL2Status>(&client, &opts, "l2-"),
        bgp: Kind::new::<ServiceBGPStatus>(&client, &opts, "bgp-"),
        states: Api::namespaced(client.clone(), &opts.namespace),
        client,
        evented: Arc::default(),
        config_written: None,
        services,
        opts,
    };
    let mut retry = RETRY_MIN;
    loop {
        let report = reports.borrow_and_update().clone();
        match w.write(&report).await {
            Ok(()) => retry = RETRY_MIN,
            Err(e) => {
                warn!(error = %e, retry_in = ?retry, "cannot write status objects; retrying");
                w.l2.known = None;
                w.bgp.known = None;
                w.config_written = None;
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(RETRY_MAX);
                continue;
            }
        }
        if reports.changed().await.is_err() {
            return;
        }
    }
}

/// The reference an Event about a Service carries, as kube's
/// `Resource::object_ref` gives it for the whole object: kind, API version,
/// namespace, name and uid.
fn object_reference(svc: &Service) -> ObjectReference {
    type Whole = k8s_openapi::api::core::v1::Service;
    ObjectReference {
        api_version: Some(Whole::api_version(&()).into_owned()),
        kind: Some(Whole::kind(&()).into_owned()),
        namespace: Some(svc.key.namespace.to_string()),
        name: Some(svc.key.name.to_string()),
        uid: svc.uid.as_ref().map(ToString::to_string),
        ..ObjectReference::default()
    }
}

/// Status objects written since the start, by kind and operation
/// (`ferrolb_status_object_writes_total`): each is a request to the
/// apiserver, and at thousands of Services per node their rate is most of
/// what the speaker asks of it.
static WRITES: [[AtomicU64; 3]; 2] = [
    [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
    [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
];
const KINDS: [&str; 2] = ["ServiceL2Status", "ServiceBGPStatus"];
const OPS: [&str; 3] = ["create", "patch", "delete"];

fn count(kind: usize, op: usize) {
    WRITES[kind][op].fetch_add(1, Ordering::Relaxed);
}

/// `ferrolb_status_object_writes_total{kind, op}`, for the metrics
/// endpoint.
pub fn render_writes() -> String {
    let mut text = String::from(
        "# HELP ferrolb_status_object_writes_total ServiceL2Status and ServiceBGPStatus requests this speaker made, by kind and operation (create, patch of the status, delete)\n\
         # TYPE ferrolb_status_object_writes_total counter\n",
    );
    for (k, kind) in KINDS.iter().enumerate() {
        for (o, op) in OPS.iter().enumerate() {
            let n = WRITES[k][o].load(Ordering::Relaxed);
            text.push_str(&format!(
                "ferrolb_status_object_writes_total{{kind=\"{kind}\",op=\"{op}\"}} {n}\n"
            ));
        }
    }
    text
}

const RETRY_MIN: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

struct Writer {
    opts: Options,
    l2: Kind,
    bgp: Kind,
    states: Api<ConfigurationState>,
    client: Client,
    /// What events have been recorded for.
    evented: Arc<Announcements>,
    config_written: Option<ConfigResult>,
    services: Store<Service>,
}

impl Writer {
    async fn write(&mut self, report: &Report) -> Result<(), kube::Error> {
        if self.config_written.as_ref() != Some(&report.config) {
            self.write_config(&report.config).await?;
            self.config_written = Some(report.config.clone());
        }
        let Some(ann) = &report.announcements else {
            return Ok(());
        };
        // `evented` is what the objects were last written from.
        let diff = changed(&self.evented, ann);
        if self.l2.known.is_none() || self.bgp.known.is_none() {
            // After a start or an error: every service, against a list.
            // Each body is built as it is written, not all of them first
            // (13,141 bodies at 16,745 Services).
            self.l2.sync(&self.opts, ann, l2_status).await?;
            self.bgp.sync(&self.opts, ann, bgp_status).await?;
        } else {
            // Only the services whose announcement changed: a change costs
            // what it touches, not a body per service.
            let mut l2 = BTreeMap::new();
            let mut bgp = BTreeMap::new();
            for key in &diff {
                let a = ann.get(*key);
                let node = &self.opts.node;
                l2.insert((*key).clone(), a.and_then(|a| l2_status(node, key, a)));
                bgp.insert((*key).clone(), a.and_then(|a| bgp_status(node, key, a)));
            }
            self.l2.apply(&self.opts, &l2).await?;
            self.bgp.apply(&self.opts, &bgp).await?;
        }
        for (key, protocol) in newly_assigned(&self.evented, ann, &diff) {
            self.node_assigned(key, protocol).await;
        }
        self.evented = Arc::clone(ann);
        Ok(())
    }

    async fn node_assigned(&self, key: &ObjectKey, protocol: &str) {
        let Some(svc) = self.services.get(key) else {
            return;
        };
        // Created directly rather than through kube-runtime's Recorder: its
        // de-duplication cache keeps every event for the process's life,
        // and these events are one per service and change.
        let reference = object_reference(&svc);
        let now = Timestamp::now();
        let ev = Event {
            metadata: ObjectMeta {
                // As client-go names events: the object, a dot, the time.
                name: Some(format!("{}.{:x}", key.name, now.as_nanosecond())),
                namespace: Some(key.namespace.to_string()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some("Normal".into()),
            reason: Some("nodeAssigned".into()),
            action: Some("Announce".into()),
            note: Some(format!(
                "announcing from node {:?} with protocol {protocol:?}",
                self.opts.node
            )),
            regarding: Some(reference),
            reporting_controller: Some(REPORTING_CONTROLLER.into()),
            reporting_instance: Some(format!("{REPORTING_CONTROLLER}-{}", self.opts.node)),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &key.namespace);
        let created = match api.create(&PostParams::default(), &ev).await {
            // MetalLB's role grants `events` in the core group only.
            Err(kube::Error::Api(e)) if e.code == 403 => {
                let core = api::event::core_v1(
                    ev.regarding.clone().unwrap_or_default(),
                    api::event::Note {
                        type_: "Normal".into(),
                        reason: "nodeAssigned".into(),
                        action: "Announce".into(),
                        message: ev.note.clone().unwrap_or_default(),
                        component: REPORTING_CONTROLLER.into(),
                        instance: format!("{REPORTING_CONTROLLER}-{}", self.opts.node),
                    },
                    now,
                );
                let core_api: Api<k8s_openapi::api::core::v1::Event> =
                    Api::namespaced(self.client.clone(), &key.namespace);
                core_api
                    .create(&PostParams::default(), &core)
                    .await
                    .map(drop)
            }
            other => other.map(drop),
        };
        match created {
            Ok(()) => info!(service = %key, protocol, "nodeAssigned event recorded"),
            Err(e) => warn!(service = %key, error = %e, "event not recorded"),
        }
    }

    async fn write_config(&self, result: &ConfigResult) -> Result<(), kube::Error> {
        let name = format!("speaker-{}", self.opts.node);
        let (result, summary) = match result {
            ConfigResult::Unknown => ("Unknown", String::new()),
            ConfigResult::Valid => ("Valid", String::new()),
            ConfigResult::Invalid(s) => ("Invalid", s.clone()),
        };
        let mut object = json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "ConfigurationState",
            "metadata": {
                "name": name,
                "labels": {LABEL_NODE: self.opts.node, "app.kubernetes.io/component": "speaker"},
            },
        });
        if let Some(owner) = owner(&self.opts) {
            object["metadata"]["ownerReferences"] = json!([owner]);
        }
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        self.states
            .patch(&name, &pp, &Patch::Apply(&object))
            .await?;
        let status = json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "ConfigurationState",
            "status": {"result": result, "errorSummary": summary},
        });
        self.states
            .patch_status(&name, &pp, &Patch::Apply(&status))
            .await?;
        Ok(())
    }
}

/// One of the two status kinds, with what this node has of it.
struct Kind {
    api: Api<DynamicObject>,
    resource: ApiResource,
    prefix: &'static str,
    /// Its place in [`KINDS`] (the counters').
    index: usize,
    /// This node's objects by service. `None`: list first.
    known: Option<Known>,
}

/// This node's objects of one kind, by service: each one's name and a
/// digest of its status (a thousand services' JSON bodies would cost
/// more than the rest of this task).
#[derive(Debug)]
struct Known {
    /// The kind's prefix, which names generated from it start with.
    prefix: &'static str,
    /// Per service: its object's name after the prefix, packed in a word
    /// (`pack`), and the status digest. 16 bytes beside the key, where
    /// a `String` and the digest took 32 and the name a heap chunk of
    /// its own (32 bytes) per service.
    objects: BTreeMap<ObjectKey, (u64, u64)>,
    /// The names that do not pack (`LONG` in `objects`), whole.
    long: BTreeMap<ObjectKey, Box<str>>,
}

/// A packed name that is kept whole in `Known::long`. No name packs to
/// it: its bytes (0xff) are not UTF-8.
const LONG: u64 = u64::MAX;

/// `name` after `prefix`, its bytes in a word (little-endian, the rest
/// zero), when it starts with `prefix` and at most 8 bytes follow, none of
/// them zero: a generated name is the prefix and 5 characters.
fn pack(prefix: &str, name: &str) -> Option<u64> {
    let rest = name.strip_prefix(prefix)?.as_bytes();
    if rest.len() > 8 || rest.contains(&0) {
        return None;
    }
    let mut word = [0u8; 8];
    word[..rest.len()].copy_from_slice(rest);
    Some(u64::from_le_bytes(word))
}

/// The name `pack` packed.
fn unpack(prefix: &str, packed: u64) -> String {
    let bytes = packed.to_le_bytes();
    let len = bytes.iter().position(|b| *b == 0).unwrap_or(8);
    let mut name = String::with_capacity(prefix.len() + len);
    name.push_str(prefix);
    name.push_str(std::str::from_utf8(&bytes[..len]).unwrap_or_default());
    name
}

impl Known {
    fn new(prefix: &'static str) -> Self {
        Self {
            prefix,
            objects: BTreeMap::new(),
            long: BTreeMap::new(),
        }
    }

    /// The service's object: its name and status digest.
    fn get(&self, key: &ObjectKey) -> Option<(String, u64)> {
        let &(packed, digest) = self.objects.get(key)?;
        Some((self.name(key, packed), digest))
    }

    fn name(&self, key: &ObjectKey, packed: u64) -> String {
        if packed == LONG {
            self.long
                .get(key)
                .map(ToString::to_string)
                .unwrap_or_default()
        } else {
            unpack(self.prefix, packed)
        }
    }

    fn contains(&self, key: &ObjectKey) -> bool {
        self.objects.contains_key(key)
    }

    fn insert(&mut self, key: ObjectKey, name: &str, digest: u64) {
        let packed = match pack(self.prefix, name) {
            Some(packed) => {
                self.long.remove(&key);
                packed
            }
            None => {
                self.long.insert(key.clone(), name.into());
                LONG
            }
        };
        self.objects.insert(key, (packed, digest));
    }

    /// Forgets the service's object; returns its name.
    fn remove(&mut self, key: &ObjectKey) -> Option<String> {
        let (packed, _) = self.objects.remove(key)?;
        if packed == LONG {
            return self.long.remove(key).map(String::from);
        }
        Some(unpack(self.prefix, packed))
    }

    fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.objects.keys()
    }

    /// Keeps `key` itself (the Service's key, whose strings the caches
    /// share) in place of an equal one read from a list, which holds
    /// strings of its own (two allocations per Service after a start
    /// that finds this node's objects).
    fn share_key(&mut self, key: &ObjectKey) {
        share_key(&mut self.objects, key);
        share_key(&mut self.long, key);
    }

    /// Filled in key order, the B-trees' nodes are about half full (each
    /// split leaves six of eleven slots behind): rebuilt from the sorted
    /// entries, full.
    fn repacked(self) -> Self {
        Self {
            prefix: self.prefix,
            objects: self.objects.into_iter().collect(),
            long: self.long.into_iter().collect(),
        }
    }
}

impl Kind {
    fn new<K: Resource<DynamicType = ()>>(
        client: &Client,
        opts: &Options,
        prefix: &'static str,
    ) -> Self {
        let resource = ApiResource::erase::<K>(&());
        let index = KINDS
            .iter()
            .position(|k| *k == resource.kind)
            .unwrap_or_default();
        Self {
            api: Api::namespaced_with(client.clone(), &opts.namespace, &resource),
            resource,
            prefix,
            index,
            known: None,
        }
    }

    /// Lists this node's objects (after a start or an error), a page at
    /// a time: one response of 13,141 objects, managed fields and all,
    /// was most of the speaker's heap at its peak. Duplicates for one
    /// service are deleted.
    async fn list(&self, opts: &Options) -> Result<Known, kube::Error> {
        let mut lp = ListParams::default()
            .labels(&format!("{LABEL_NODE}={}", opts.node))
            .limit(LIST_PAGE);
        let mut known = Known::new(self.prefix);
        loop {
            let page = self.api.list(&lp).await?;
            let next = page.metadata.continue_.filter(|c| !c.is_empty());
            self.take_page(page.items, &mut known).await?;
            match next {
                Some(token) => lp = lp.continue_token(&token),
                None => return Ok(known),
            }
        }
    }

    /// Adds one page of a list to `known`.
    async fn take_page(
        &self,
        items: Vec<DynamicObject>,
        known: &mut Known,
    ) -> Result<(), kube::Error> {
        for o in items {
            let labels = o.metadata.labels.clone().unwrap_or_default();
            let name = o.metadata.name.clone().unwrap_or_default();
            let key = ObjectKey {
                namespace: labels
                    .get(LABEL_SERVICE_NAMESPACE)
                    .map_or_else(Arc::default, |n| n.as_str().into()),
                name: labels
                    .get(LABEL_SERVICE_NAME)
                    .map_or_else(Arc::default, |n| n.as_str().into()),
            };
            let status = digest(o.data.get("status").unwrap_or(&Value::Null));
            if known.contains(&key) {
                self.delete(&name).await?;
            } else {
                known.insert(key, &name, status);
            }
        }
        Ok(())
    }

    /// Creates, updates and deletes objects so that exactly those `body`
    /// makes of `ann` exist (listing them first when they are not known).
    async fn sync(
        &mut self,
        opts: &Options,
        ann: &Announcements,
        body: Body,
    ) -> Result<(), kube::Error> {
        let mut known = match self.known.take() {
            Some(k) => k,
            None => self.list(opts).await?,
        };
        let gone: Vec<ObjectKey> = known
            .keys()
            .filter(|k| ann.get(*k).and_then(|a| body(&opts.node, k, a)).is_none())
            .cloned()
            .collect();
        for key in gone {
            self.remove(&mut known, &key).await?;
        }
        for (key, a) in ann {
            if let Some(status) = body(&opts.node, key, a) {
                self.put(opts, &mut known, key, &status).await?;
            }
        }
        // Filled in key order: rebuilt full, in this pass over every
        // service.
        self.known = Some(known.repacked());
        Ok(())
    }

    /// Writes the services in `changes` alone: a body, or `None` for no
    /// object. The objects must be known (after a [`Kind::sync`]).
    async fn apply(
        &mut self,
        opts: &Options,
        changes: &BTreeMap<ObjectKey, Option<Value>>,
    ) -> Result<(), kube::Error> {
        let Some(mut known) = self.known.take() else {
            return Ok(());
        };
        for (key, status) in changes {
            match status {
                None => self.remove(&mut known, key).await?,
                Some(status) => self.put(opts, &mut known, key, status).await?,
            }
        }
        self.known = Some(known);
        Ok(())
    }

    /// Deletes the service's object, if there is one.
    async fn remove(&self, known: &mut Known, key: &ObjectKey) -> Result<(), kube::Error> {
        if let Some(name) = known.remove(key) {
            self.delete(&name).await?;
            debug!(kind = self.resource.kind, service = %key, name, "status deleted");
        }
        Ok(())
    }

    /// Creates the service's object if needed, and writes its status
    /// unless it already holds it.
    async fn put(
        &self,
        opts: &Options,
        known: &mut Known,
        key: &ObjectKey,
        status: &Value,
    ) -> Result<(), kube::Error> {
        let want = digest(status);
        let name = match known.get(key) {
            Some((_, have)) if have == want => {
                known.share_key(key);
                return Ok(());
            }
            Some((name, _)) => name,
            None => self.create(opts, key).await?,
        };
        // A list that became empty is removed, not left behind.
        let mut body = status.clone();
        for field in ["interfaces", "peers"] {
            if body.get(field).is_none() {
                body[field] = Value::Null;
            }
        }
        let patch = json!({"status": body});
        count(self.index, 1);
        self.api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        known.insert(key.clone(), &name, want);
        Ok(())
    }

    /// Creates an object for a service (status empty: the status
    /// subresource is written next); returns its generated name. A
    /// generated name that is taken is tried again with another: an
    /// apiserver before Kubernetes 1.31 (where `RetryGenerateName` became
    /// on by default) answers 409 AlreadyExists when its five random characters hit an
    /// existing object's, about 70 times for 45,000 objects, and each such
    /// error failed the whole pass, which then listed and began again.
    async fn create(&self, opts: &Options, key: &ObjectKey) -> Result<String, kube::Error> {
        retry_taken_name(|| self.create_once(opts, key)).await
    }

    async fn create_once(&self, opts: &Options, key: &ObjectKey) -> Result<String, kube::Error> {
        let mut metadata = json!({
            "generateName": self.prefix,
            "namespace": opts.namespace,
            "labels": {
                LABEL_NODE: opts.node,
                LABEL_SERVICE_NAME: &*key.name,
                LABEL_SERVICE_NAMESPACE: &*key.namespace,
            },
        });
        if let Some(owner) = owner(opts) {
            metadata["ownerReferences"] = json!([owner]);
        }
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": metadata,
            "spec": {},
        }))
        .map_err(kube::Error::SerdeError)?;
        count(self.index, 0);
        let created = self.api.create(&PostParams::default(), &object).await?;
        Ok(created.metadata.name.unwrap_or_default())
    }

    async fn delete(&self, name: &str) -> Result<(), kube::Error> {
        count(self.index, 2);
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Keeps `key` itself in `known` in place of an equal one read from a
/// list (`Known::share_key`).
fn share_key<V>(known: &mut BTreeMap<ObjectKey, V>, key: &ObjectKey) {
    let listed = known.get_key_value(key).is_some_and(|(k, _)| {
        !Arc::ptr_eq(&k.name, &key.name) || !Arc::ptr_eq(&k.namespace, &key.namespace)
    });
    if listed && let Some(v) = known.remove(key) {
        known.insert(key.clone(), v);
    }
}

/// Calls `create` until it does not answer that its generated name is
/// taken (409 AlreadyExists), at most [`GENERATE_ATTEMPTS`] times; the last
/// answer is returned.
async fn retry_taken_name<F, Fut>(mut create: F) -> Result<String, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<String, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        match create().await {
            Err(kube::Error::Api(e))
                if e.code == 409 && e.reason == "AlreadyExists" && attempt < GENERATE_ATTEMPTS =>
            {
                debug!(attempt, "generated name taken; creating again");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Creates tried before a taken generated name is an error (as many as
/// the apiserver's own retry makes, from Kubernetes 1.31).
const GENERATE_ATTEMPTS: u32 = 8;

/// A digest of a status body, the same for the same content whatever
/// the order of its keys: serde_json keeps maps in insertion order here
/// (`preserve_order`, which `api` enables), so a body built as
/// `node, serviceName, serviceNamespace, peers` and the same status read
/// back from the API (its keys sorted) printed differently, and every
/// object was written again after every list: 44,801 PATCHes at each
/// start at 50,000 Services.
fn digest(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    hash_value(v, &mut h);
    h.finish()
}

/// Hashes `v` with each object's keys in sorted order.
fn hash_value(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            h.write_u8(b'{');
            h.write_usize(entries.len());
            for (key, value) in entries {
                key.hash(h);
                hash_value(value, h);
            }
        }
        Value::Array(items) => {
            h.write_u8(b'[');
            h.write_usize(items.len());
            for item in items {
                hash_value(item, h);
            }
        }
        scalar => scalar.to_string().hash(h),
    }
}

/// Builds one kind's status body of a service on `node`, or `None` when
/// the service has no object of that kind.
type Body = fn(&str, &ObjectKey, &ServiceAnnouncement) -> Option<Value>;

/// The `ServiceL2Status` body of a service answered for from here.
fn l2_status(node: &str, key: &ObjectKey, a: &ServiceAnnouncement) -> Option<Value> {
    let interfaces: Vec<Value> = a.l2.as_ref()?.iter().map(|n| json!({"name": n})).collect();
    Some(status(node, key, "interfaces", interfaces))
}

/// The `ServiceBGPStatus` body of a service advertised from here.
fn bgp_status(node: &str, key: &ObjectKey, a: &ServiceAnnouncement) -> Option<Value> {
    if a.bgp.is_empty() {
        return None;
    }
    let peers: Vec<Value> = a.bgp.iter().map(|p| json!(&**p)).collect();
    Some(status(node, key, "peers", peers))
}

/// A status body: node, service, and the protocol's list.
fn status(node: &str, key: &ObjectKey, field: &str, list: Vec<Value>) -> Value {
    let mut status = json!({
        "node": node,
        "serviceName": &*key.name,
        "serviceNamespace": &*key.namespace,
    });
    if !list.is_empty() {
        status[field] = Value::Array(list);
    }
    status
}

/// The owner reference to the speaker Pod, when known.
fn owner(opts: &Options) -> Option<OwnerReference> {
    let (name, uid) = opts.pod.as_ref()?;
    Some(OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: name.clone(),
        uid: uid.clone(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    })
}

/// Objects per page when listing this node's status objects.
const LIST_PAGE: u32 = 500;

/// The `reportingController` of events (MetalLB's speaker component).
const REPORTING_CONTROLLER: &str = "metallb-speaker";

/// The field manager of server-side applies.
const FIELD_MANAGER: &str = "ferrolb-speaker";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::announce::stored::Uid;
    use crate::announce::watched;

    /// The same status digests the same whether built here (keys in the
    /// order written: serde_json preserves it in this workspace) or read
    /// back from the API (keys sorted); another status does not.
    #[test]
    fn digests_do_not_depend_on_key_order() {
        let key = ObjectKey::new("lg-19", "svc-047539");
        let ann = ServiceAnnouncement {
            bgp: vec![Arc::from("scale-frr")].into(),
            ..ServiceAnnouncement::default()
        };
        let built = bgp_status("node-04999", &key, &ann).unwrap_or_else(|| panic!("a body"));
        // As the apiserver returned it (a ServiceBGPStatus of the 50,000
        // run on kube-apiserver v1.28.15).
        let read: Value = serde_json::from_str(
            r#"{"node":"node-04999","peers":["scale-frr"],"serviceName":"svc-047539","serviceNamespace":"lg-19"}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(built.to_string(), read.to_string(), "the orders differ");
        assert_eq!(digest(&built), digest(&read));
        let other = ServiceAnnouncement {
            bgp: vec![Arc::from("scale-frr"), Arc::from("second")].into(),
            ..ServiceAnnouncement::default()
        };
        let two = bgp_status("node-04999", &key, &other).unwrap_or_else(|| panic!("a body"));
        assert_ne!(digest(&built), digest(&two));
        let moved = bgp_status("node-00001", &key, &ann).unwrap_or_else(|| panic!("a body"));
        assert_ne!(digest(&built), digest(&moved));
        // A key moved into a list's object is another value.
        assert_ne!(
            digest(&json!({"a": {"b": 1}, "c": 2})),
            digest(&json!({"a": {"b": 1, "c": 2}}))
        );
    }

    fn api_error(code: u16, reason: &str) -> kube::Error {
        let mut status = kube::core::Status::failure("refused", reason);
        status.code = code;
        kube::Error::Api(status.boxed())
    }

    /// A create whose generated name is taken is made again, up to
    /// GENERATE_ATTEMPTS times; any other error is returned at once.
    #[tokio::test]
    async fn a_taken_generated_name_is_tried_again() {
        let calls = std::cell::Cell::new(0);
        let created = retry_taken_name(|| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 3 {
                    Err(api_error(409, "AlreadyExists"))
                } else {
                    Ok(format!("bgp-{n}"))
                }
            }
        })
        .await;
        assert_eq!(created.ok().as_deref(), Some("bgp-3"));
        assert_eq!(calls.get(), 3);

        calls.set(0);
        let taken = retry_taken_name(|| {
            calls.set(calls.get() + 1);
            async { Err::<String, _>(api_error(409, "AlreadyExists")) }
        })
        .await;
        assert!(matches!(taken, Err(kube::Error::Api(e)) if e.code == 409));
        assert_eq!(calls.get(), GENERATE_ATTEMPTS);

        for (code, reason) in [
            (409, "Conflict"),
            (403, "Forbidden"),
            (500, "InternalError"),
        ] {
            calls.set(0);
            let refused = retry_taken_name(|| {
                calls.set(calls.get() + 1);
                async move { Err::<String, _>(api_error(code, reason)) }
            })
            .await;
            assert!(matches!(refused, Err(kube::Error::Api(e)) if e.code == code));
            assert_eq!(calls.get(), 1, "{reason}: not retried");
        }
    }

    /// An Event names the Service as kube names the whole object: the
    /// record keeps what the reference needs (the uid). A uid the
    /// apiserver writes (a UUID in canonical text) is kept as its 16
    /// bytes; any other text (upper case, braces, too short) as it is.
    #[test]
    fn uids_in_16_bytes_name_the_service_as_kube_does() {
        let uuid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        for uid in [
            uuid,
            "00000000-0000-0000-0000-000000000000",
            "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0",
            "{0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0}",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f",
            "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-00",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg",
            "u-1",
            "",
        ] {
            let object = json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "ns", "uid": uid,
                             "resourceVersion": "9", "labels": {"app": "web"}},
                "spec": {"type": "LoadBalancer"},
            });
            let whole: k8s_openapi::api::core::v1::Service =
                serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{e}"));
            let read: watched::Service =
                serde_json::from_value(object).unwrap_or_else(|e| panic!("{e}"));
            let record = Service::from(read);
            assert_eq!(object_reference(&record), whole.object_ref(&()), "{uid:?}");
            let bytes = matches!(record.uid, Some(Uid::Uuid(_)));
            assert_eq!(
                bytes,
                uid == uuid || uid.starts_with("00000000-"),
                "{uid:?}"
            );
        }
    }

    /// A key read from a list is replaced by the Service's own (the same
    /// strings as the caches'); the entry's value stays, in both maps.
    #[test]
    fn known_keys_share_the_services_strings() {
        for name in ["bgp-abcde", "another-name-kept-whole"] {
            let listed = ObjectKey::new("ns", "web");
            let mut known = Known::new("bgp-");
            known.insert(listed.clone(), name, 7);
            let svc = ObjectKey::new("ns", "web");
            known.share_key(&svc);
            let (k, _) = known
                .objects
                .get_key_value(&svc)
                .unwrap_or_else(|| panic!("kept"));
            assert!(Arc::ptr_eq(&k.name, &svc.name) && Arc::ptr_eq(&k.namespace, &svc.namespace));
            assert!(!Arc::ptr_eq(&k.name, &listed.name));
            if let Some((k, _)) = known.long.get_key_value(&svc) {
                assert!(Arc::ptr_eq(&k.name, &svc.name), "{name}");
            }
            assert_eq!(known.get(&svc), Some((name.to_owned(), 7)));
            assert_eq!(known.objects.len(), 1);
            // Absent: nothing added.
            known.share_key(&ObjectKey::new("ns", "other"));
            assert_eq!(known.objects.len(), 1);
        }
    }

    /// Names are given back as they were put, packed or not: a generated
    /// name (the prefix and 5 characters) and any up to 8 bytes after the
    /// prefix in the word, others whole; a name that changes from one
    /// form to the other leaves nothing of the first.
    #[test]
    fn known_names_come_back_as_put() {
        let cases = [
            ("bgp-x7k2q", true),
            ("bgp-", true),
            ("bgp-12345678", true),
            ("bgp-123456789", false),
            ("l2-abcde", false),
            ("bg", false),
            ("bgp-\u{e9}t\u{e9}", true),
        ];
        let mut known = Known::new("bgp-");
        for (i, (name, packs)) in cases.iter().enumerate() {
            assert_eq!(pack("bgp-", name).is_some(), *packs, "{name}");
            let key = ObjectKey::new("ns", format!("s{i}"));
            known.insert(key.clone(), name, i as u64);
            assert_eq!(known.get(&key), Some(((*name).to_owned(), i as u64)));
            assert_eq!(known.long.contains_key(&key), !packs, "{name}");
        }
        let key = ObjectKey::new("ns", "s4");
        known.insert(key.clone(), "bgp-abcde", 9);
        assert!(!known.long.contains_key(&key));
        known.insert(key.clone(), "long-name-again", 10);
        assert_eq!(known.get(&key), Some(("long-name-again".to_owned(), 10)));
        assert_eq!(known.remove(&key).as_deref(), Some("long-name-again"));
        assert!(!known.long.contains_key(&key) && !known.contains(&key));
        let key = ObjectKey::new("ns", "s0");
        assert_eq!(known.remove(&key).as_deref(), Some("bgp-x7k2q"));
        assert_eq!(known.remove(&key), None);
        let left: Vec<_> = known.keys().map(ToString::to_string).collect();
        let repacked = known.repacked();
        assert_eq!(
            repacked.keys().map(ToString::to_string).collect::<Vec<_>>(),
            left
        );
    }
}
