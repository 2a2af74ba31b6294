//! `kubectl ferrolb`: what ferrolb does in a cluster, and why. It only
//! reads.
//!
//! [`cluster`] lists the objects (the only module that talks to the API
//! server). The reports are pure functions of that [`cluster::Snapshot`],
//! and they decide nothing themselves: [`status`] and [`explain`] run the
//! controller's allocation state ([`controller::state::State::start`], the
//! code `controller run` starts with and `controller plan` runs) and the
//! speaker's per-service decisions ([`speaker::announce::explain`], on each
//! node's [`speaker::announce::ClusterView`]) over the listed objects, and
//! put their answers beside what the programs wrote (Service status,
//! ServiceL2Status, ServiceBGPStatus, ConfigurationState, Events).
//! [`diff`] runs the same decisions twice, on the cluster as it is and
//! with the objects of some files applied, and compares them.
//! `migrate-configmap` is [`api::legacy`]: it reads no cluster.
//! [`table`] prints a report as columns; `-o json|yaml` serialises it.

pub mod cluster;
pub mod diff;
pub mod explain;
pub mod status;
pub mod table;

/// The flags the controller and the speakers run with, which the reports
/// need to decide as they do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The namespace of the metallb.io objects and the speaker Pods
    /// (MetalLB's `metallb-system`).
    pub metallb_namespace: String,
    /// The `loadBalancerClass` the controller and speakers serve (their
    /// `--lb-class`); `None`: Services without a class.
    pub lb_class: Option<String>,
    /// The label selector of the speaker Pods (the speaker's
    /// `--memberlist-labels`).
    pub speaker_labels: String,
    /// The speakers run with `--ignore-exclude-lb`.
    pub ignore_exclude_lb: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            metallb_namespace: "metallb-system".into(),
            lb_class: None,
            speaker_labels: "app=metallb,component=speaker".into(),
            ignore_exclude_lb: false,
        }
    }
}
