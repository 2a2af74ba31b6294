//! A real etcd + kube-apiserver for integration tests, like kubebuilder's envtest.
//!
//! Test glue only: this crate starts processes, writes files and talks to an API
//! server, and nothing in the product depends on it at run time.
//!
//! The binaries come from `testenv/build`, which builds the versions pinned in
//! `testenv/go/go.mod` and caches them under `~/.cache/ferrolb/testenv/`. The
//! start routine is `testenv/supervise`, the same script behind `testenv/up`;
//! this crate runs it, waits for its `ready` line and reads what it wrote.
//!
//! ```no_run
//! # async fn demo() -> Result<(), testenv::Error> {
//! let env = testenv::TestEnv::global();
//! let ns = env.fresh_namespace("demo").await?;
//! let client = env.client()?;
//! # let _ = (ns, client);
//! # Ok(())
//! # }
//! ```
//!
//! Lifetime: [`TestEnv::global`] starts one environment per test binary and never
//! stops it explicitly, because Rust does not drop statics. The supervisor stops
//! etcd and kube-apiserver and removes the run directory when this process exits
//! anyway: its standard input closes, and it also gets SIGTERM from
//! `PR_SET_PDEATHSIG`, which is tied to a dedicated thread that lives as long as
//! the environment.

pub mod golden;

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};

/// One etcd + kube-apiserver pair, with its kubeconfig.
///
/// Dropping it (or [`TestEnv::stop`]) stops both processes and removes the run
/// directory.
#[derive(Debug)]
pub struct TestEnv {
    run_dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    bin: PathBuf,
    pids: Mutex<Pids>,
    config: kube::Config,
    supervisor: Mutex<Option<Supervisor>>,
}

impl TestEnv {
    /// The environment shared by every test in this test binary, started on
    /// first use.
    ///
    /// Blocks while etcd and kube-apiserver start (a few seconds). Call it from
    /// any thread, inside or outside a Tokio runtime.
    ///
    /// # Panics
    ///
    /// If the environment cannot start, for example because the binaries are not
    /// built (run `testenv/build`) or `openssl`, `curl` or `setpriv` are missing.
    /// The failure is remembered: later calls panic with the same message
    /// instead of trying again. Tests never skip for lack of binaries.
    pub fn global() -> &'static Self {
        static GLOBAL: OnceLock<Result<TestEnv, String>> = OnceLock::new();
        match GLOBAL.get_or_init(|| Self::start().map_err(|e| e.to_string())) {
            Ok(env) => env,
            Err(msg) => panic!("testenv: {msg}"),
        }
    }

    /// Starts a private environment, separate from [`TestEnv::global`].
    ///
    /// Most tests want the global one; this is for tests about the environment
    /// itself, or tests that change cluster-wide objects (CRDs) in ways other
    /// tests must not see. Blocks until the apiserver is ready.
    ///
    /// Binaries are taken from `$FERROLB_TESTENV_BIN` when it is set, else from
    /// the cache that `testenv/build` fills. Set `FERROLB_TESTENV_KEEP=1` to keep
    /// the run directory (logs, certificates) after stop.
    pub fn start() -> Result<Self, Error> {
        Self::start_with(&[])
    }

    /// Like [`TestEnv::start`], with Services of two families: the apiserver
    /// gets `--service-cluster-ip-range=<service_cidrs>` (for example
    /// `10.96.0.0/16,fd00:96::/112`), so dual-stack Services can be created.
    pub fn start_with_service_cidrs(service_cidrs: &str) -> Result<Self, Error> {
        Self::start_with(&[("FERROLB_TESTENV_SERVICE_CIDRS", service_cidrs)])
    }

    /// Starts the supervisor with these variables added to its environment
    /// (the options `testenv/supervise` documents).
    fn start_with(vars: &[(&str, &str)]) -> Result<Self, Error> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let run_dir = make_run_dir()?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("supervise");
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread_dir = run_dir.clone();
        // pdeathsig fires when the thread that spawned the child exits, so the
        // child is spawned from a thread that outlives it rather than from a
        // test's (short-lived) thread.
        let thread = thread::Builder::new()
            .name("testenv-supervise".into())
            .spawn(move || supervise(&script, &thread_dir, &vars, &ready_tx))
            .map_err(|source| Error::Io {
                context: "spawn the supervisor thread".into(),
                source,
            })?;
        let stdin = match ready_rx.recv() {
            Ok(Ok(stdin)) => stdin,
            Ok(Err(e)) => {
                let _ = thread.join();
                let _ = std::fs::remove_dir_all(&run_dir);
                return Err(e);
            }
            Err(mpsc::RecvError) => {
                let _ = thread.join();
                return Err(Error::Start(
                    "the supervisor thread ended unexpectedly".into(),
                ));
            }
        };
        let supervisor = Supervisor { stdin, thread };
        // From here on, an early return drops `supervisor`, which stops it.
        let state = read_state(&run_dir.join("state"))?;
        let field = |key: &str| {
            state
                .get(key)
                .cloned()
                .ok_or_else(|| Error::Start(format!("the state file lacks {key}")))
        };
        let pid = |key: &str| {
            field(key)?
                .parse::<u32>()
                .map_err(|_| Error::Start(format!("the state file has a bad {key}")))
        };
        let pids = Pids {
            supervise: pid("SUPERVISE_PID")?,
            etcd: pid("ETCD_PID")?,
            apiserver: pid("APISERVER_PID")?,
        };
        let kubeconfig = PathBuf::from(field("KUBECONFIG")?);
        let server = field("SERVER")?;
        let bin = PathBuf::from(field("BIN")?);
        let config = load_config(&kubeconfig)?;
        Ok(Self {
            run_dir,
            kubeconfig,
            server,
            bin,
            pids: Mutex::new(pids),
            config,
            supervisor: Mutex::new(Some(supervisor)),
        })
    }

    /// Stops etcd and kube-apiserver and removes the run directory, waiting
    /// until both are gone.
    pub fn stop(self) -> Result<(), Error> {
        self.shutdown()
    }

    /// A new client for this environment, authenticated as a member of
    /// `system:masters`.
    ///
    /// Call it inside the Tokio runtime that will use the client: a client
    /// belongs to the runtime it was made in, and each `#[tokio::test]` has its
    /// own. Making one is cheap.
    pub fn client(&self) -> Result<kube::Client, Error> {
        Ok(kube::Client::try_from(self.config.clone())?)
    }

    /// The client configuration read from [`TestEnv::kubeconfig_path`].
    #[must_use]
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// The kubeconfig file for this environment, for tools such as kubectl.
    #[must_use]
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The directory of the pinned etcd, kube-apiserver and kubectl binaries
    /// this environment runs.
    #[must_use]
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// A `kubectl` command for this environment: the pinned kubectl from
    /// [`TestEnv::bin_dir`], with `KUBECONFIG` set to the admin kubeconfig.
    #[must_use]
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(self.bin.join("kubectl"));
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    #[must_use]
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// The run directory: certificates, etcd data, logs, pid files.
    #[must_use]
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The processes behind this environment (0 for one that
    /// [`TestEnv::kill`] killed and that has not been started again).
    #[must_use]
    pub fn pids(&self) -> Pids {
        *self
            .pids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kills `which` with SIGKILL, as a crash would, and leaves the other
    /// running; the supervisor keeps the environment up until
    /// [`TestEnv::restart`] starts it again. For fault tests: use a private
    /// environment ([`TestEnv::start`]) or keep other tests off the shared one
    /// meanwhile.
    pub fn kill(&self, which: Component) -> Result<(), Error> {
        self.control(&format!("kill {}", which.name()))
    }

    /// Starts `which` again after [`TestEnv::kill`], on the same port (etcd
    /// on its data, so every object is still there), and returns once it
    /// serves: the apiserver answers `/readyz`, etcd `/health`.
    pub fn restart(&self, which: Component) -> Result<(), Error> {
        self.control(&format!("start {}", which.name()))
    }

    /// Sends one command to the supervisor and waits until it has been carried
    /// out: the supervisor rewrites its state file with the next generation.
    /// The supervisor bounds each start itself (it gives up after 120 s and
    /// exits), so the wait ends when it does.
    fn control(&self, command: &str) -> Result<(), Error> {
        let state_path = self.run_dir.join("state");
        let generation = |state: &BTreeMap<String, String>| {
            state
                .get("GENERATION")
                .and_then(|g| g.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let mut guard = self
            .supervisor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(supervisor) = guard.as_mut() else {
            return Err(Error::Stop("the environment was stopped".into()));
        };
        let before = generation(&read_state(&state_path)?);
        writeln!(supervisor.stdin, "{command}").map_err(|source| Error::Io {
            context: format!("send '{command}' to the supervisor"),
            source,
        })?;
        loop {
            if supervisor.thread.is_finished() {
                return Err(Error::Start(format!(
                    "the supervisor exited while carrying out '{command}' \
                     (its report is on this test's standard error)"
                )));
            }
            // The state file is replaced by a rename, so a read sees the old
            // or the new version whole.
            let state = read_state(&state_path)?;
            if generation(&state) > before {
                let pid = |key: &str| state.get(key).and_then(|p| p.parse().ok()).unwrap_or(0);
                let mut pids = self
                    .pids
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                pids.etcd = pid("ETCD_PID");
                pids.apiserver = pid("APISERVER_PID");
                return Ok(());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Creates or updates `crds` with server-side apply and waits until each is
    /// Established, so its custom resources can be used right away.
    ///
    /// Idempotent: every test may call it for the CRDs it needs.
    pub async fn install_crds<I>(&self, crds: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = CustomResourceDefinition>,
    {
        let api: Api<CustomResourceDefinition> = Api::all(self.client()?);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut names = Vec::new();
        for crd in crds {
            let name = crd.metadata.name.clone().ok_or(Error::UnnamedCrd)?;
            api.patch(&name, &params, &Patch::Apply(&crd)).await?;
            names.push(name);
        }
        for name in names {
            let established = await_condition(api.clone(), &name, conditions::is_crd_established());
            match tokio::time::timeout(ESTABLISHED_TIMEOUT, established).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(Error::Wait(e)),
                Err(_) => {
                    return Err(Error::NotEstablished {
                        name,
                        timeout: ESTABLISHED_TIMEOUT,
                    });
                }
            }
        }
        Ok(())
    }

    /// Like [`TestEnv::install_crds`], for CRDs in YAML: one or more documents
    /// separated by `---`, such as a project's `config/crd` output.
    pub async fn install_crds_yaml(&self, yaml: &str) -> Result<(), Error> {
        let crds: Vec<CustomResourceDefinition> =
            serde_saphyr::from_multiple(yaml).map_err(|e| Error::Yaml(e.to_string()))?;
        self.install_crds(crds).await
    }

    /// Creates a namespace with a unique name that starts with `prefix-` and
    /// returns the name.
    ///
    /// Namespaces are left in place: no namespace controller runs to finish
    /// deleting them, and the whole apiserver goes away with the test binary.
    pub async fn fresh_namespace(&self, prefix: &str) -> Result<String, Error> {
        let api: Api<Namespace> = Api::all(self.client()?);
        let namespace = Namespace {
            metadata: ObjectMeta {
                // The apiserver appends five random characters; a clash is
                // reported as a conflict, so try again.
                generate_name: Some(format!("{prefix}-")),
                labels: Some(BTreeMap::from([(
                    "ferrolb.io/testenv".to_owned(),
                    "true".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match api.create(&PostParams::default(), &namespace).await {
                Ok(created) => return created.metadata.name.ok_or(Error::UnnamedNamespace),
                Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn shutdown(&self) -> Result<(), Error> {
        let supervisor = match self.supervisor.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        match supervisor {
            Some(supervisor) => supervisor.stop(),
            None => Ok(()),
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// One of the two processes behind a [`TestEnv`], for [`TestEnv::kill`] and
/// [`TestEnv::restart`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// etcd.
    Etcd,
    /// kube-apiserver.
    Apiserver,
}

impl Component {
    fn name(self) -> &'static str {
        match self {
            Self::Etcd => "etcd",
            Self::Apiserver => "apiserver",
        }
    }
}

/// Process ids of a running [`TestEnv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pids {
    /// The `testenv/supervise` script, a child of this process.
    pub supervise: u32,
    /// etcd, a child of the supervisor.
    pub etcd: u32,
    /// kube-apiserver, a child of the supervisor.
    pub apiserver: u32,
}

/// Why an environment could not start or could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The supervisor failed; the message is its report, including the end of
    /// the failing process's log and, for missing binaries, how to build them.
    #[error("could not start etcd and kube-apiserver: {0}")]
    Start(String),
    /// The supervisor did not stop cleanly: it exited with an error (such as
    /// etcd or kube-apiserver having died earlier), or could not be waited for.
    #[error("testenv/supervise did not stop cleanly: {0}")]
    Stop(String),
    /// A local file or process operation failed.
    #[error("could not {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The kubeconfig the supervisor wrote could not be loaded.
    #[error("could not load the kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// A request to the apiserver failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Watching a CRD for its Established condition failed.
    #[error("watching a CRD failed: {0}")]
    Wait(kube::runtime::wait::Error),
    /// A CRD did not become Established in time.
    #[error("CRD {name} was not Established within {timeout:?}")]
    NotEstablished {
        /// The CRD's name.
        name: String,
        /// How long we waited.
        timeout: Duration,
    },
    /// A CRD passed to [`TestEnv::install_crds`] has no `metadata.name`.
    #[error("a CRD has no metadata.name")]
    UnnamedCrd,
    /// The apiserver returned a namespace without a name.
    #[error("the apiserver created a namespace without a name")]
    UnnamedNamespace,
    /// CRD YAML did not parse.
    #[error("invalid CRD YAML: {0}")]
    Yaml(String),
}

/// The running supervisor: the write end of its standard input, and the thread
/// that spawned it and waits for it.
#[derive(Debug)]
struct Supervisor {
    stdin: ChildStdin,
    thread: JoinHandle<Option<ExitStatus>>,
}

impl Supervisor {
    fn stop(self) -> Result<(), Error> {
        // End of input tells the supervisor to stop its children, remove the
        // run directory and exit.
        drop(self.stdin);
        match self.thread.join() {
            Ok(Some(status)) if status.success() => Ok(()),
            Ok(Some(status)) => Err(Error::Stop(format!("it exited with {status}"))),
            Ok(None) => Err(Error::Stop("it could not be waited for".into())),
            Err(_) => Err(Error::Stop("its thread panicked".into())),
        }
    }
}

/// The body of the supervisor thread: spawns `testenv/supervise`, reports its
/// `ready` line (or its error output) through `ready`, then waits for it to
/// exit. Returns the exit status, or `None` if it could not be waited for.
fn supervise(
    script: &Path,
    run_dir: &Path,
    vars: &[(String, String)],
    ready: &mpsc::Sender<Result<ChildStdin, Error>>,
) -> Option<ExitStatus> {
    // setpriv (util-linux) sets PR_SET_PDEATHSIG, which std cannot do without
    // unsafe code: the supervisor gets SIGTERM when this thread ends.
    let spawned = Command::new("setpriv")
        .args(["--pdeathsig", "TERM", "--"])
        .arg(script)
        .arg(run_dir)
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let what = if e.kind() == io::ErrorKind::NotFound {
                "run setpriv (install util-linux)".to_owned()
            } else {
                format!("run {}", script.display())
            };
            let _ = ready.send(Err(Error::Io {
                context: what,
                source: e,
            }));
            return None;
        }
    };
    let (Some(stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = ready.send(Err(Error::Start("no pipes to the supervisor".into())));
        return child.wait().ok();
    };
    let is_ready = BufReader::new(stdout)
        .lines()
        .any(|line| line.is_ok_and(|line| line == "ready"));
    if is_ready {
        let _ = ready.send(Ok(stdin));
        let status = child.wait().ok();
        if let Some(status) = status.filter(|s| !s.success()) {
            // The environment died under a running test: say why, since the
            // test will only see refused connections.
            let mut report = String::new();
            let _ = stderr.read_to_string(&mut report);
            eprintln!("testenv: the supervisor exited with {status}\n{report}");
        }
        status
    } else {
        drop(stdin);
        let mut report = String::new();
        let _ = stderr.read_to_string(&mut report);
        let status = child.wait().ok();
        let report = report.trim();
        let message = if report.is_empty() {
            format!("testenv/supervise exited with {status:?} before it was ready")
        } else {
            report.to_owned()
        };
        let _ = ready.send(Err(Error::Start(message)));
        status
    }
}

/// Makes a new run directory, unique to this process and call.
fn make_run_dir() -> Result<PathBuf, Error> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let pid = std::process::id();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ferrolb-testenv-{pid}-{n}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            // Left by an earlier process with the same pid: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(Error::Io {
                    context: format!("create {}", dir.display()),
                    source,
                });
            }
        }
    }
}

/// Reads the supervisor's `KEY=VALUE` state file.
fn read_state(path: &Path) -> Result<BTreeMap<String, String>, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        context: format!("read {}", path.display()),
        source,
    })?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect())
}

/// Loads the kubeconfig the way a user's client would.
fn load_config(path: &Path) -> Result<kube::Config, Error> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    // Reading a token and a CA file does no async I/O, so any executor will do,
    // including inside a Tokio runtime.
    Ok(futures::executor::block_on(
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()),
    )?)
}

/// The field manager for server-side apply from this crate.
const FIELD_MANAGER: &str = "ferrolb-testenv";

/// How long [`TestEnv::install_crds`] waits for each CRD.
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);
