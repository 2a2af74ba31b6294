//! Named components and their states, as `/healthz` and `/readyz` report
//! them.
//!
//! A component is something the process needs: a long-lived task, a
//! connection, "the configuration". Its owner either pushes its state
//! ([`Health::component`], then [`Component::set`]) or registers a check
//! that is asked on each request ([`Health::check`]). The rules:
//!
//! - `/healthz` (liveness) fails while any component is
//!   [`State::Failed`]: the process cannot recover on its own, restart it.
//! - `/readyz` (readiness) succeeds only while every component is
//!   [`State::Ready`].
//!
//! A registry with no component is live and ready. A failed state stays
//! until its owner sets another one or [`Health::remove`]s the component:
//! a dead task stays reported.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// A component's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not ready yet (or not any more), for this reason; still alive.
    Starting(String),
    /// Working.
    Ready,
    /// Broken beyond what the process repairs itself, for this reason:
    /// fails `/healthz` and `/readyz`.
    Failed(String),
}

/// The registry: cheap to clone, every clone is the same registry.
#[derive(Clone, Default)]
pub struct Health {
    entries: Arc<Mutex<BTreeMap<String, Entry>>>,
}

/// A handle to one pushed component: its owner sets its state.
#[derive(Clone, Debug)]
pub struct Component {
    name: Arc<str>,
    health: Health,
}

/// Every component's state at one moment, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// (name, state), sorted by name.
    pub components: Vec<(String, State)>,
}

/// A check: asked for the component's state on each request. It runs on
/// the server's task, so it must be quick and must not block.
type Check = Arc<dyn Fn() -> State + Send + Sync>;

enum Entry {
    Pushed(State),
    Checked(Check),
}

impl Health {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the component `name` as [`State::Starting`] (replacing
    /// any component of that name) and returns the handle its owner sets
    /// the state with.
    pub fn component(&self, name: impl Into<String>) -> Component {
        let name: String = name.into();
        self.lock().insert(
            name.clone(),
            Entry::Pushed(State::Starting("starting".into())),
        );
        Component {
            name: name.into(),
            health: self.clone(),
        }
    }

    /// Registers the component `name` whose state `check` gives on each
    /// request (replacing any component of that name).
    pub fn check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> State + Send + Sync + 'static,
    ) {
        self.lock()
            .insert(name.into(), Entry::Checked(Arc::new(check)));
    }

    /// Forgets the component `name` (one that went away on purpose, such
    /// as a removed peer's task).
    pub fn remove(&self, name: &str) {
        self.lock().remove(name);
    }

    /// Every component's state now. Checks run outside the registry's lock,
    /// so a check may use the registry.
    pub fn report(&self) -> Report {
        let entries: Vec<(String, Result<State, Check>)> = self
            .lock()
            .iter()
            .map(|(name, entry)| {
                let state = match entry {
                    Entry::Pushed(s) => Ok(s.clone()),
                    Entry::Checked(c) => Err(Arc::clone(c)),
                };
                (name.clone(), state)
            })
            .collect();
        let components = entries
            .into_iter()
            .map(|(name, state)| (name, state.unwrap_or_else(|check| check())))
            .collect();
        Report { components }
    }

    fn set(&self, name: &str, state: State) {
        self.lock().insert(name.to_owned(), Entry::Pushed(state));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        // Every update is a single insert or remove: a panic elsewhere
        // while holding the lock leaves the map consistent.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Health")
            .field("components", &self.report().components)
            .finish()
    }
}

impl Component {
    /// The component's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the component's state.
    pub fn set(&self, state: State) {
        self.health.set(&self.name, state);
    }

    /// Sets [`State::Ready`].
    pub fn ready(&self) {
        self.set(State::Ready);
    }

    /// Sets [`State::Starting`] with this reason.
    pub fn starting(&self, reason: impl Into<String>) {
        self.set(State::Starting(reason.into()));
    }

    /// Sets [`State::Failed`] with this reason.
    pub fn fail(&self, reason: impl Into<String>) {
        self.set(State::Failed(reason.into()));
    }
}

impl Report {
    /// No component has failed (`/healthz`).
    pub fn is_live(&self) -> bool {
        !self
            .components
            .iter()
            .any(|(_, s)| matches!(s, State::Failed(_)))
    }

    /// Every component is ready (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.components.iter().all(|(_, s)| *s == State::Ready)
    }

    /// The failed components, one `failed: NAME: REASON` line each.
    pub fn failures(&self) -> String {
        self.lines(|s| matches!(s, State::Failed(_)))
    }

    /// The components that are not ready, one line each
    /// (`failed: NAME: REASON` or `not ready: NAME: REASON`).
    pub fn not_ready(&self) -> String {
        self.lines(|s| *s != State::Ready)
    }

    /// The registry as Prometheus gauges: `ferrolb_live` (what `/healthz`
    /// answers 200 for), `ferrolb_ready` (what `/readyz` answers 200 for)
    /// and `ferrolb_component_ready` per `component`, so an alert sees a
    /// process that answers its scrapes but is not ready.
    pub fn render_metrics(&self) -> String {
        let mut out = format!(
            "# HELP ferrolb_live 1 unless a component failed (/healthz answers 200)\n\
             # TYPE ferrolb_live gauge\nferrolb_live {}\n\
             # HELP ferrolb_ready 1 if every component is ready (/readyz answers 200)\n\
             # TYPE ferrolb_ready gauge\nferrolb_ready {}\n\
             # HELP ferrolb_component_ready 1 if the component is ready, 0 if starting or failed\n\
             # TYPE ferrolb_component_ready gauge\n",
            u8::from(self.is_live()),
            u8::from(self.is_ready())
        );
        for (name, state) in &self.components {
            out.push_str(&format!(
                "ferrolb_component_ready{{component=\"{}\"}} {}\n",
                crate::metrics::escape(name),
                u8::from(*state == State::Ready)
            ));
        }
        out
    }

    fn lines(&self, pick: impl Fn(&State) -> bool) -> String {
        let mut out = String::new();
        for (name, state) in self.components.iter().filter(|(_, s)| pick(s)) {
            let line = match state {
                State::Failed(why) => format!("failed: {name}: {why}\n"),
                State::Starting(why) => format!("not ready: {name}: {why}\n"),
                State::Ready => continue,
            };
            out.push_str(&line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn empty_registry_is_live_and_ready() {
        let r = Health::new().report();
        assert!(r.is_live() && r.is_ready());
    }

    #[test]
    fn pushed_states_decide_liveness_and_readiness() {
        let health = Health::new();
        let bgp = health.component("bgp 10.0.0.1");
        let l2 = health.component("l2");
        let r = health.report();
        assert!(r.is_live() && !r.is_ready());
        assert_eq!(
            r.not_ready(),
            "not ready: bgp 10.0.0.1: starting\nnot ready: l2: starting\n"
        );
        bgp.ready();
        l2.ready();
        assert!(health.report().is_ready());
        bgp.fail("task panicked: index out of bounds");
        let r = health.report();
        assert!(!r.is_live() && !r.is_ready());
        assert_eq!(
            r.failures(),
            "failed: bgp 10.0.0.1: task panicked: index out of bounds\n"
        );
        // A clone of the handle is the same component.
        bgp.clone().ready();
        assert!(health.report().is_live());
        health.remove("bgp 10.0.0.1");
        assert_eq!(health.report().components.len(), 1);
        assert_eq!(l2.name(), "l2");
    }

    #[test]
    fn gauges_say_what_the_probes_answer() {
        let health = Health::new();
        let bgp = health.component("bgp 10.0.0.1");
        health.component("l2").ready();
        assert_eq!(
            health.report().render_metrics(),
            "# HELP ferrolb_live 1 unless a component failed (/healthz answers 200)\n\
             # TYPE ferrolb_live gauge\nferrolb_live 1\n\
             # HELP ferrolb_ready 1 if every component is ready (/readyz answers 200)\n\
             # TYPE ferrolb_ready gauge\nferrolb_ready 0\n\
             # HELP ferrolb_component_ready 1 if the component is ready, 0 if starting or failed\n\
             # TYPE ferrolb_component_ready gauge\n\
             ferrolb_component_ready{component=\"bgp 10.0.0.1\"} 0\n\
             ferrolb_component_ready{component=\"l2\"} 1\n"
        );
        bgp.fail("task ended");
        let text = health.report().render_metrics();
        assert!(text.contains("\nferrolb_live 0\n"), "{text}");
        assert!(text.contains("\nferrolb_ready 0\n"), "{text}");
    }

    #[test]
    fn checks_are_asked_on_each_report() {
        let health = Health::new();
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        health.check("configuration", move || {
            if f.load(Ordering::Relaxed) {
                State::Ready
            } else {
                State::Starting("no configuration applied yet".into())
            }
        });
        assert_eq!(
            health.report().not_ready(),
            "not ready: configuration: no configuration applied yet\n"
        );
        flag.store(true, Ordering::Relaxed);
        assert!(health.report().is_ready());
        // Checks run outside the lock: one may update the registry.
        let side = health.component("side");
        health.check("updater", move || {
            side.ready();
            State::Ready
        });
        // The first report saw "side" before the check ran.
        assert!(!health.report().is_ready());
        assert!(health.report().is_ready());
    }
}
