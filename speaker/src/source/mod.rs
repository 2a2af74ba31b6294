//! Where the speaker's cluster objects come from. Each source produces
//! [`Snapshot`]s, the same objects the Kubernetes API would give, and the
//! reconcile loop turns them into a [`crate::announce::ClusterView`] with
//! [`crate::announce::ClusterView::from_k8s`], so every source shares one
//! code path.
//!
//! [`self::file`]: a directory of YAML documents (standalone mode).
//! [`self::k8s`]: watches on the Kubernetes API.

pub mod excludel2;
pub mod file;
pub mod k8s;
pub mod keyring;
pub mod selected;
pub mod store;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use api::model::{Model, PASSWORD_SECRET_KEY};
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::announce::stored;

/// Every object the speaker reads, as one consistent set: Nodes, Services
/// and EndpointSlices as the speaker keeps them ([`stored`]: only the
/// fields it uses, no `ObjectMeta`), Secrets trimmed. The Kubernetes
/// objects are shared (`Arc`) with the source's caches, and so is each
/// list: the Kubernetes source hands on the last list of a kind none of
/// whose objects changed (the same `Arc`, which the reconcile loop
/// compares by pointer), so a snapshot of a large cluster costs pointers,
/// not copies. Its `Debug` names the Secrets and never shows their data.
#[derive(Clone, Default)]
pub struct Snapshot {
    /// The metallb.io objects, parsed and valid.
    pub model: Arc<Model>,
    /// Nodes.
    pub nodes: Shared<stored::Node>,
    /// Services, with their status (ingress IPs).
    pub services: Shared<stored::Service>,
    /// EndpointSlices.
    pub slices: Shared<stored::EndpointSlice>,
    /// Secrets (BGP passwords), trimmed by [`trim_secret`].
    pub secrets: Shared<corev1::Secret>,
}

/// A list of shared objects, itself shared ([`stored::List`]: each in an
/// `Arc`, an EndpointSlice its own thin pointer).
pub type Shared<T> = stored::List<T>;

/// A result of the configuration source: what it sends the reconcile loop.
pub type Reload = Result<Snapshot, Rejected>;

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets: Vec<(Option<&str>, Option<&str>)> = self
            .secrets
            .iter()
            .map(|s| (s.metadata.namespace.as_deref(), s.metadata.name.as_deref()))
            .collect();
        f.debug_struct("Snapshot")
            .field("model", &self.model)
            .field("nodes", &self.nodes)
            .field("services", &self.services)
            .field("slices", &self.slices)
            .field("secrets", &secrets)
            .finish()
    }
}

/// Keeps of a Secret only what a BGPPeer's `passwordSecret` can use: its
/// name, namespace and the `password` key (of `data`, or of `stringData`
/// in file mode). Every other key, label and annotation is dropped as the
/// Secret arrives, so the speaker does not hold the other credentials of
/// its namespace (service account tokens, Helm releases, the memberlist
/// key) in memory.
pub fn trim_secret(s: &mut corev1::Secret) {
    let key = PASSWORD_SECRET_KEY;
    s.data = s
        .data
        .take()
        .and_then(|mut d| d.remove_entry(key))
        .map(|kv| BTreeMap::from([kv]));
    s.string_data = s
        .string_data
        .take()
        .and_then(|mut d| d.remove_entry(key))
        .map(|kv| BTreeMap::from([kv]));
    trim_meta(&mut s.metadata);
}

/// Drops the metadata the speaker never reads of a kept object: labels,
/// annotations, managed fields, owner references, finalizers (name,
/// namespace, uid, resource version and deletion stay).
pub fn trim_meta(meta: &mut ObjectMeta) {
    meta.annotations = None;
    meta.labels = None;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
}

/// A configuration the source refused, with the cluster objects it read.
#[derive(Debug)]
pub struct Rejected {
    /// Every error found.
    pub errors: Vec<file::Error>,
    /// The current Nodes, Services, EndpointSlices and Secrets (its model
    /// empty) when they were all read: one bad metallb.io object must not
    /// freeze the rest of the view. `None` when the objects may be
    /// incomplete (a file that is not YAML).
    pub cluster: Option<Box<Snapshot>>,
}

impl Snapshot {
    /// This snapshot's configuration with the cluster objects of `cluster`:
    /// what the speaker acts on while a newer configuration is refused. As
    /// MetalLB, it keeps the last good configuration and keeps reconciling
    /// services, endpoints and nodes.
    #[must_use]
    pub fn with_cluster(&self, cluster: Self) -> Self {
        Self {
            model: Arc::clone(&self.model),
            ..cluster
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn secrets_keep_only_the_password_and_never_show_it() {
        let mut secret = corev1::Secret {
            metadata: ObjectMeta {
                name: Some("bgp-auth".into()),
                namespace: Some("metallb-system".into()),
                annotations: Some(BTreeMap::from([(
                    "note".into(),
                    "{\"stringData\":{\"token\":\"other-credential\"}}".into(),
                )])),
                labels: Some(BTreeMap::from([("app".into(), "x".into())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("password".into(), ByteString(b"s3cret-key".to_vec())),
                ("token".into(), ByteString(b"other-credential".to_vec())),
            ])),
            string_data: Some(BTreeMap::from([(
                "ca.crt".into(),
                "other-credential".into(),
            )])),
            type_: Some("kubernetes.io/basic-auth".into()),
            ..corev1::Secret::default()
        };
        trim_secret(&mut secret);
        assert_eq!(
            secret.data,
            Some(BTreeMap::from([(
                "password".into(),
                ByteString(b"s3cret-key".to_vec())
            )]))
        );
        assert_eq!(secret.string_data, None);
        assert!(!format!("{secret:?}").contains("other-credential"));
        assert_eq!(secret.metadata.name.as_deref(), Some("bgp-auth"));
        // A Secret no peer could use is kept as an empty shell.
        let mut other = corev1::Secret {
            metadata: secret.metadata.clone(),
            data: Some(BTreeMap::from([(
                "token".into(),
                ByteString(b"other-credential".to_vec()),
            )])),
            ..corev1::Secret::default()
        };
        trim_secret(&mut other);
        assert_eq!(other.data, None);

        let snap = Snapshot {
            secrets: [Arc::new(secret)].into(),
            ..Snapshot::default()
        };
        let shown = format!("{snap:?} {snap:#?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("bgp-auth"), "{shown}");
    }
}
