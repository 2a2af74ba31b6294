//! Which Service labels the Kubernetes source keeps, and which
//! configuration is in force while the Services are listed again for a
//! label key their records lack (issue 18 §1).
//!
//! Only the advertisements' `serviceSelectors` read a Service's labels
//! ([`Model::service_label_keys`]); most installs have none, and a stored
//! Service then keeps no label at all. A configuration that names a key
//! the stored records were not made with cannot be decided on them: a
//! missing `app` reads as "absent", which `NotIn` and `DoesNotExist`
//! select, and `matchLabels` does not. So [`Selected::step`] keeps the
//! configuration in force (the last one every record serves) and has the
//! Services listed again with the new keys; the new configuration goes
//! into force with the snapshot that carries that whole list. Decisions
//! never see a record without a key their configuration reads.
//!
//! A configuration that names fewer keys goes into force at once; the
//! records made from then on keep only its keys, the others keep theirs
//! until their Service changes or the next list (lazily: trimming every
//! record at once would make every Service new to the view and to the
//! keyed decisions, for labels no selector reads).
//!
//! The file source keeps every label: each read has the configuration and
//! the Services together, and a refused configuration's Services must
//! still serve the last good one's selectors (file mode is small; no list
//! to hold a configuration for).
//!
//! Pure state: the source applies [`Step`]s (the keys the Services'
//! records are made with, a restart of their watch).

use std::collections::BTreeSet;
use std::sync::Arc;

use api::model::Model;
use api::watched::Labels;

/// Label keys, shared by the source's snapshot task and the Services'
/// watch.
pub type Keys = Arc<BTreeSet<String>>;

/// `labels` with only the pairs whose key is in `keys`: the same set when
/// every pair stays (no allocation), none when no pair does.
#[must_use]
pub fn only(labels: &Labels, keys: &BTreeSet<String>) -> Labels {
    let kept = labels.iter().filter(|(k, _)| keys.contains(*k)).count();
    if kept == labels.len() {
        return labels.clone();
    }
    labels.iter().filter(|(k, _)| keys.contains(*k)).collect()
}

/// The keys the Services' records keep, which of them every stored
/// record has, and the configuration in force.
#[derive(Debug, Default)]
pub struct Selected {
    /// The keys records are made with now.
    keep: Keys,
    /// Counts the changes of `keep`; 0 until the first
    /// configuration (the Services' watch waits for it).
    generation: u64,
    /// The keys every stored record was made with (a subset of those it
    /// was made with): what a configuration in force may read.
    held: BTreeSet<String>,
    /// The configuration in force: the last one sent.
    in_force: Option<Arc<Model>>,
    /// How many times the Services were listed again for new keys.
    relists: u64,
}

/// What the source does after a [`Selected::step`].
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    /// The configuration a snapshot carries now: the new one, or the one
    /// in force while the Services are listed again; `None` when none
    /// can be (the first valid configuration waits for its list).
    pub model: Option<Arc<Model>>,
    /// New keys for the Services' records and their generation, when
    /// they changed.
    pub keep: Option<(u64, Keys)>,
    /// Whether the Services' watch (re)starts: its list then makes every
    /// record with the new keys.
    pub relist: bool,
}

impl Selected {
    /// The keys the records are made with now, and their generation.
    #[must_use]
    pub fn keep(&self) -> (u64, Keys) {
        (self.generation, Arc::clone(&self.keep))
    }

    /// How many times the Services were listed again because a
    /// configuration named a new key (the first list not counted).
    #[must_use]
    pub fn relists(&self) -> u64 {
        self.relists
    }

    /// A snapshot is about to be built: `wanted` is the configuration the
    /// metallb.io objects give now (`None`: refused; the one in force
    /// stays), `listed` the generation of keys of the Services' last whole
    /// list (`None`: none yet). Read `listed` before the Services' list
    /// the snapshot takes: a list swapped in after it is only newer.
    pub fn step(&mut self, wanted: Option<&Arc<Model>>, listed: Option<u64>) -> Step {
        if self.generation > 0 && listed == Some(self.generation) {
            self.held.clone_from(&self.keep);
        }
        let mut step = Step {
            model: None,
            keep: None,
            relist: false,
        };
        let Some(wanted) = wanted else {
            // The first configuration is refused: the Services are listed
            // all the same (the rest of the view stays current), keeping
            // no label.
            if self.generation == 0 {
                self.generation = 1;
                step.keep = Some(self.keep());
                step.relist = true;
            }
            step.model.clone_from(&self.in_force);
            return step;
        };
        let needs = wanted.service_label_keys();
        if self.generation == 0 {
            // The first list is made with the first configuration's keys.
            self.keep = Arc::new(needs);
            self.generation = 1;
            self.in_force = Some(Arc::clone(wanted));
            return Step {
                model: self.in_force.clone(),
                keep: Some(self.keep()),
                relist: true,
            };
        }
        if needs.is_subset(&self.held) {
            if *self.keep != needs {
                // Fewer keys (or a list for keys no longer wanted): the
                // records made from now keep these; every record has them.
                self.held.clone_from(&needs);
                self.keep = Arc::new(needs);
                self.generation += 1;
                step.keep = Some(self.keep());
            }
            self.in_force = Some(Arc::clone(wanted));
            step.model.clone_from(&self.in_force);
            return step;
        }
        // A key the records may lack: list again with it, and with the
        // keys of the configuration in force, which stays until then.
        let mut keep = needs;
        if let Some(m) = &self.in_force {
            keep.extend(m.service_label_keys());
        }
        if *self.keep != keep {
            self.held.retain(|k| keep.contains(k));
            self.keep = Arc::new(keep);
            self.generation += 1;
            self.relists += 1;
            step.keep = Some(self.keep());
            step.relist = true;
        }
        step.model.clone_from(&self.in_force);
        step
    }
}

#[cfg(test)]
mod tests;
