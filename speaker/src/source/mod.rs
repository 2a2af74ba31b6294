//! Where the speaker's cluster objects come from. Each source produces
//! [`Snapshot`]s, the same objects the Kubernetes API would give, and the
//! reconcile loop turns them into a [`crate::announce::ClusterView`] with
//! [`crate::announce::ClusterView::from_k8s`], so every source shares one
//! code path.
//!
//! [`self::file`]: a directory of YAML documents (standalone mode).
//! [`self::k8s`]: watches on the Kubernetes API.

pub mod file;
pub mod k8s;
pub mod keyring;

use api::validate::Config;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::discovery::v1 as discoveryv1;

/// Every object the speaker reads, as one consistent set.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The metallb.io objects.
    pub config: Config,
    /// Nodes.
    pub nodes: Vec<corev1::Node>,
    /// Services, with their status (ingress IPs).
    pub services: Vec<corev1::Service>,
    /// EndpointSlices.
    pub slices: Vec<discoveryv1::EndpointSlice>,
    /// Secrets (BGP passwords).
    pub secrets: Vec<corev1::Secret>,
}
