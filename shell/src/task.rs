//! Long-lived tasks: named, supervised, and never dying in silence.
//!
//! - [`spawn`]: a tokio task in a `task` span that names it, so anything it
//!   logs (a panic included) says which task it was.
//! - [`Supervisor`]: for tasks that must run as long as the program. Any end
//!   of one while the supervisor lives (it returned, panicked or was
//!   cancelled) is logged (`error!`, with the cause), marks the task's
//!   health component [`State::Failed`](crate::State::Failed) (so `/healthz`
//!   and `/readyz` fail), and is handed to the program by
//!   [`Supervisor::failed`], which ends it with an error (exit code 1).
//! - [`abort_on_panic`]: the panic hook [`crate::main`] installs: the panic
//!   (message, location, thread, task) is logged through `tracing`, then the
//!   process aborts. A panic means a broken invariant in state some task
//!   owns alone; the other tasks' views of it (what was announced, to whom)
//!   cannot be trusted any more, so the process ends and the kubelet starts
//!   a clean one, whatever the profile's `panic` strategy.
//!
//! With the `fault-injection` feature (tests only; never in a release
//! build), the hidden environment variable `FERROLB_FAULT_INJECT` makes a
//! task panic or return at its first poll: `panic:NAME` or `end:NAME`, where
//! NAME is a prefix of the task's name.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::PanicHookInfo;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{Instrument, debug, error, info_span};

use crate::health::{Component, Health};

/// Spawns `fut` as a tokio task named `name` (inside a runtime): its logs,
/// and the panic hook's report, carry a `task` span with that name.
pub fn spawn<F>(name: impl Into<String>, fut: F) -> JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let name: String = name.into();
    let span = info_span!("task", task = %name);
    tokio::spawn(injected(&name, fut).instrument(span))
}

/// Spawns `fut` as a task named `name` on a runtime of its own, driven by
/// a thread of its own (named `name`, as far as the OS allows): its
/// timers, its sockets and the tasks it spawns are served there, so a
/// busy program runtime (a flood on another port, a long reconcile) does
/// not delay them. For short periodic work with deadlines of its own,
/// like BFD's detection time. The thread ends when the task does
/// (returned, panicked, or aborted through the handle), which can be
/// awaited from any runtime.
///
/// # Errors
/// If the runtime or the thread cannot be created.
pub fn spawn_on_thread<F>(name: impl Into<String>, fut: F) -> std::io::Result<JoinHandle<()>>
where
    F: Future<Output = ()> + Send + 'static,
{
    let name: String = name.into();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let span = info_span!("task", task = %name);
    let fut = injected(&name, fut);
    let task = rt.spawn(
        async move {
            // Dropped however the task ends, which ends the thread.
            let _done = done_tx;
            fut.await;
        }
        .instrument(span),
    );
    std::thread::Builder::new().name(name).spawn(move || {
        rt.block_on(async {
            let _ = done_rx.await;
        });
    })?;
    Ok(task)
}

/// `fut`, or under the `fault-injection` feature the fault
/// `FERROLB_FAULT_INJECT` asks for the task `name`, at its first poll.
fn injected<F>(name: &str, fut: F) -> impl Future<Output = ()> + Send + 'static
where
    F: Future<Output = ()> + Send + 'static,
{
    #[cfg(feature = "fault-injection")]
    let fault = fault::for_task(name).map(|f| (f, name.to_owned()));
    #[cfg(not(feature = "fault-injection"))]
    let _ = name;
    async move {
        #[cfg(feature = "fault-injection")]
        match fault {
            Some((fault::Fault::Panic, name)) => panic!("injected fault: task {name} panics"),
            Some((fault::Fault::End, _)) => return,
            None => {}
        }
        fut.await;
    }
}

/// Watches tasks that must run as long as the program; see the module
/// docs. Dropping it (or [`Supervisor::stop`]) ends the watch: tasks that
/// end after it, in a shutdown, are not failures.
#[derive(Debug)]
pub struct Supervisor {
    spawner: Spawner,
    failures: mpsc::UnboundedReceiver<Failure>,
}

/// Spawns supervised tasks; cheap to clone, for the code that starts them.
#[derive(Clone, Debug)]
pub struct Spawner {
    health: Health,
    failures: mpsc::UnboundedSender<Failure>,
    stopping: Arc<AtomicBool>,
}

/// A supervised task that ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The task's name.
    pub task: String,
    /// How it ended.
    pub cause: Cause,
}

/// How a supervised task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Its future returned.
    Returned,
    /// It panicked, with this message (only seen without the
    /// [`abort_on_panic`] hook, which aborts first).
    Panicked(String),
    /// It was cancelled (aborted, or its runtime shut down).
    Cancelled,
}

impl Supervisor {
    /// A supervisor whose tasks appear in `health` as components named
    /// `task NAME`.
    pub fn new(health: Health) -> Self {
        let (tx, failures) = mpsc::unbounded_channel();
        Self {
            spawner: Spawner {
                health,
                failures: tx,
                stopping: Arc::default(),
            },
            failures,
        }
    }

    /// A handle to spawn supervised tasks with.
    pub fn spawner(&self) -> Spawner {
        self.spawner.clone()
    }

    /// Spawns a supervised task (see [`Spawner::spawn`]).
    pub fn spawn<F>(&self, name: impl Into<String>, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawner.spawn(name, fut);
    }

    /// Waits for the first supervised task to end (forever if none does).
    /// Cancel-safe: a failure not taken stays for the next call.
    pub async fn failed(&mut self) -> Failure {
        match self.failures.recv().await {
            Some(f) => f,
            // The supervisor holds a sender: the channel never closes.
            None => std::future::pending().await,
        }
    }

    /// The program is shutting down: tasks that end from now on are not
    /// failures.
    pub fn stop(&self) {
        self.spawner.stopping.store(true, Ordering::Relaxed);
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Spawner {
    /// Spawns `fut` as a named task ([`spawn`]) that must not end: its
    /// health component `task NAME` is ready while it runs; if it ends
    /// while the supervisor lives, the end is logged with its cause, the
    /// component fails, and [`Supervisor::failed`] returns it.
    pub fn spawn<F>(&self, name: impl Into<String>, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let name: String = name.into();
        let component = self.health.component(format!("task {name}"));
        component.ready();
        let reporter = Reporter {
            name: name.clone(),
            component,
            spawner: self.clone(),
        };
        let on_return = reporter.clone();
        let span = info_span!("task", task = %name);
        // A return is reported by the task itself, at once: before anything
        // that sees its channels close (and may stop the supervisor) runs.
        let handle = tokio::spawn(
            async move {
                injected(&name, fut).await;
                on_return.report(Cause::Returned);
            }
            .instrument(span),
        );
        tokio::spawn(async move {
            if let Err(e) = handle.await {
                let cause = match e.try_into_panic() {
                    Ok(payload) => Cause::Panicked(panic_message(payload.as_ref()).to_owned()),
                    Err(_) => Cause::Cancelled,
                };
                reporter.report(cause);
            }
        });
    }
}

/// Reports the end of one supervised task.
#[derive(Clone)]
struct Reporter {
    name: String,
    component: Component,
    spawner: Spawner,
}

impl Reporter {
    fn report(&self, cause: Cause) {
        let name = &self.name;
        if self.spawner.stopping.load(Ordering::Relaxed) {
            debug!(task = %name, %cause, "task ended in shutdown");
            self.spawner.health.remove(self.component.name());
            return;
        }
        error!(task = %name, %cause, "task ended unexpectedly");
        self.component.fail(cause.to_string());
        let _ = self.spawner.failures.send(Failure {
            task: name.clone(),
            cause,
        });
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {} ended unexpectedly: {}", self.task, self.cause)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Returned => f.write_str("returned"),
            Self::Panicked(msg) => write!(f, "panicked: {msg}"),
            Self::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// Installs the panic hook: logs the panic (`error!` "panic", with
/// `panic.message`, `panic.location`, `thread` and the tokio `task_id`,
/// inside the panicking task's span, which names it), then aborts the
/// process. Call it once logging is set up ([`crate::main`] does).
pub fn abort_on_panic() {
    std::panic::set_hook(Box::new(|info: &PanicHookInfo<'_>| {
        log_panic(info);
        std::process::abort();
    }));
}

fn log_panic(info: &PanicHookInfo<'_>) {
    let message = panic_message(info.payload());
    let location = info
        .location()
        .map_or_else(|| "unknown".to_owned(), ToString::to_string);
    let thread = std::thread::current();
    let thread = thread.name().unwrap_or("unnamed");
    let task_id = tokio::task::try_id().map(|id| id.to_string());
    error!(
        panic.message = %message,
        panic.location = %location,
        thread,
        task_id = task_id.as_deref().unwrap_or("none"),
        "panic: aborting"
    );
}

/// A panic payload's message (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(non-string panic payload)"
    }
}

#[cfg(feature = "fault-injection")]
mod fault {
    //! Test-only faults, chosen by `FERROLB_FAULT_INJECT`.

    /// What an injected fault does to the task at its first poll.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Fault {
        Panic,
        End,
    }

    /// The fault `FERROLB_FAULT_INJECT` asks for the task `name`.
    pub(super) fn for_task(name: &str) -> Option<Fault> {
        parse(&std::env::var("FERROLB_FAULT_INJECT").ok()?, name)
    }

    /// `panic:PREFIX` or `end:PREFIX`, for a task whose name starts with
    /// PREFIX.
    pub(super) fn parse(spec: &str, name: &str) -> Option<Fault> {
        let (what, prefix) = spec.split_once(':')?;
        if prefix.is_empty() || !name.starts_with(prefix) {
            return None;
        }
        match what {
            "panic" => Some(Fault::Panic),
            "end" => Some(Fault::End),
            _ => None,
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn specs_pick_tasks_by_prefix() {
            assert_eq!(parse("panic:bgp peer", "bgp peer r1"), Some(Fault::Panic));
            assert_eq!(
                parse("end:config", "configuration source"),
                Some(Fault::End)
            );
            assert_eq!(parse("panic:bgp peer", "l2"), None);
            assert_eq!(parse("panic:", "l2"), None);
            assert_eq!(parse("explode:l2", "l2"), None);
            assert_eq!(parse("l2", "l2"), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::State;

    /// The task runs on a thread of its own, named, with timers of its
    /// own: it gets on while the caller's runtime is blocked, its handle
    /// is awaited from the caller's runtime, and an abort ends it.
    #[tokio::test(flavor = "current_thread")]
    async fn spawn_on_thread_runs_apart_from_the_callers_runtime() {
        let caller = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        let task = spawn_on_thread("own-thread", async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let me = std::thread::current();
            let _ = tx.send((me.id(), me.name().map(str::to_owned)));
        })
        .unwrap();
        // Blocks the caller's only runtime thread: the task's timer must
        // fire elsewhere (the timeout only bounds a failure).
        let (id, name) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_ne!(id, caller);
        assert_eq!(name.as_deref(), Some("own-thread"));
        task.await.unwrap();

        let pending = spawn_on_thread("aborted", std::future::pending::<()>()).unwrap();
        pending.abort();
        assert!(pending.await.unwrap_err().is_cancelled());
    }

    fn state(health: &Health, name: &str) -> Option<State> {
        health
            .report()
            .components
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
    }

    #[tokio::test]
    async fn a_task_that_returns_is_a_failure() {
        let health = Health::new();
        let mut sup = Supervisor::new(health.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        sup.spawn("source", async move {
            let _ = rx.await;
        });
        assert_eq!(state(&health, "task source"), Some(State::Ready));
        drop(tx);
        let f = sup.failed().await;
        assert_eq!(
            f,
            Failure {
                task: "source".into(),
                cause: Cause::Returned
            }
        );
        assert_eq!(f.to_string(), "task source ended unexpectedly: returned");
        let r = health.report();
        assert!(!r.is_live() && !r.is_ready());
        assert_eq!(r.failures(), "failed: task source: returned\n");
    }

    #[tokio::test]
    async fn a_panic_is_a_failure_with_its_message() {
        let health = Health::new();
        let mut sup = Supervisor::new(health.clone());
        let spawner = sup.spawner();
        spawner.spawn("bgp peer r1", async {
            let v: Vec<u8> = Vec::new();
            let i = v.len() + 3;
            // An index out of bounds, as a bug would have it.
            let _ = std::hint::black_box(&v)[i];
        });
        let f = sup.failed().await;
        assert_eq!(f.task, "bgp peer r1");
        let Cause::Panicked(msg) = &f.cause else {
            panic!("not a panic: {f}");
        };
        assert!(msg.contains("index out of bounds"), "{msg}");
        assert_eq!(
            state(&health, "task bgp peer r1"),
            Some(State::Failed(format!("panicked: {msg}")))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn running_tasks_are_not_failures() {
        let health = Health::new();
        let mut sup = Supervisor::new(health.clone());
        sup.spawn("forever", std::future::pending());
        // Paused time: the timeout fires once nothing else can run.
        let r = tokio::time::timeout(Duration::from_secs(3600), sup.failed()).await;
        assert!(r.is_err(), "{r:?}");
        assert!(health.report().is_ready());
    }

    #[tokio::test]
    async fn ends_after_stop_are_not_failures() {
        let health = Health::new();
        let mut sup = Supervisor::new(health.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
        sup.spawn("publisher", async move {
            let _ = rx.await;
            let _ = done_tx.send(());
        });
        sup.stop();
        drop(tx);
        done.await.unwrap();
        // The monitor runs after the task: wait until it has removed the
        // component.
        while state(&health, "task publisher").is_some() {
            tokio::task::yield_now().await;
        }
        assert!(health.report().is_live());
        assert!(sup.failures.try_recv().is_err());
    }

    #[test]
    fn panic_messages_are_read_from_both_payload_types() {
        let s: Box<dyn Any + Send> = Box::new("static");
        assert_eq!(panic_message(s.as_ref()), "static");
        let s: Box<dyn Any + Send> = Box::new(String::from("owned"));
        assert_eq!(panic_message(s.as_ref()), "owned");
        let s: Box<dyn Any + Send> = Box::new(7_u32);
        assert_eq!(panic_message(s.as_ref()), "(non-string panic payload)");
    }
}
