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

use std::sync::Arc;

use api::model::Model;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::discovery::v1 as discoveryv1;

/// Every object the speaker reads, as one consistent set. The Kubernetes
/// objects are shared (`Arc`) with the source's caches, so a snapshot of a
/// large cluster costs pointers, not copies.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The metallb.io objects, parsed and valid.
    pub model: Arc<Model>,
    /// Nodes.
    pub nodes: Vec<Arc<corev1::Node>>,
    /// Services, with their status (ingress IPs).
    pub services: Vec<Arc<corev1::Service>>,
    /// EndpointSlices.
    pub slices: Vec<Arc<discoveryv1::EndpointSlice>>,
    /// Secrets (BGP passwords).
    pub secrets: Vec<Arc<corev1::Secret>>,
}

/// A result of the configuration source: what it sends the reconcile loop.
pub type Reload = Result<Snapshot, Rejected>;

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
