//! Child processes killed by PID on drop, per-test run directories, and the
//! unique names both use.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A child process, killed by PID when dropped.
///
/// Made by [`Netns::spawn`](crate::Netns::spawn) or
/// [`Netns::spawn_command`](crate::Netns::spawn_command). Drop sends SIGTERM,
/// waits up to [`Proc::STOP_GRACE`], then sends SIGKILL, and reaps the child.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    label: String,
    log: Option<PathBuf>,
    status: Option<ExitStatus>,
}

impl Proc {
    /// How long [`Proc::stop`] waits after SIGTERM before SIGKILL.
    pub const STOP_GRACE: Duration = Duration::from_secs(3);

    pub(crate) fn new(child: Child, label: String, log: Option<PathBuf>) -> Self {
        Self {
            child,
            label,
            log,
            status: None,
        }
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A short description: the program and the namespace it runs in.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Takes the child's standard input, if it was piped.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// Takes the child's standard output, if it was piped.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// The file that receives the process's stdout and stderr, if any.
    pub fn log(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// Sends `signal` to the process (SIGSTOP freezes a router, for example).
    ///
    /// # Panics
    ///
    /// If the process has already been reaped.
    pub fn signal(&mut self, signal: Signal) {
        if let Some(status) = self.try_status() {
            panic!(
                "testnet: cannot send {signal} to {}: it exited ({status})",
                self.label
            );
        }
        if let Err(e) = kill(self.nix_pid(), signal) {
            panic!("testnet: sending {signal} to {}: {e}", self.label);
        }
    }

    /// The exit status if the process has exited (and reaps it), else `None`.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.try_status().is_none()
    }

    /// Stops the process (SIGTERM, SIGKILL after [`Proc::STOP_GRACE`]) and
    /// reaps it. Returns its exit status (`None` only if waiting failed).
    /// Calling it again is harmless.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.try_status() {
            return Some(status);
        }
        let pid = self.nix_pid();
        // A stopped process handles SIGTERM only once continued.
        let _ = kill(pid, Signal::SIGTERM);
        let _ = kill(pid, Signal::SIGCONT);
        let deadline = Instant::now() + Self::STOP_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = self.try_status() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        self.status = self.child.wait().ok();
        self.status
    }

    fn nix_pid(&self) -> Pid {
        // Linux PIDs fit in i32 (pid_max <= 2^22).
        Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A per-test directory under the system temp dir, named like the namespaces
/// (`flb-<pid>-<counter>-<tag>`), mode 0755.
///
/// Removed on drop, except while the thread is panicking or when the
/// environment variable `TESTNET_KEEP` is set: then its path is printed and
/// the logs in it stay for inspection.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates a fresh directory (a stale one with the same name, left by an
    /// earlier process with the same PID, is removed first).
    ///
    /// # Panics
    ///
    /// If the directory cannot be created.
    pub fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(unique_name(tag));
        let _ = fs::remove_dir_all(&path);
        if let Err(e) = fs::create_dir_all(&path)
            .and_then(|()| fs::set_permissions(&path, fs::Permissions::from_mode(0o755)))
        {
            panic!("testnet: creating run dir {}: {e}", path.display());
        }
        Self { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory joined with `name`.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Prints every `*.log` and `*.out` file in the directory to stderr (the
    /// last [`RunDir::DUMP_LINES`] lines of each), which the test harness
    /// shows when the test fails.
    pub fn dump_logs(&self, title: &str) {
        let mut files: Vec<PathBuf> = fs::read_dir(&self.path)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "out"))
            .collect();
        files.sort();
        let mut out = String::new();
        for file in files {
            let text = fs::read_to_string(&file).unwrap_or_else(|e| format!("<unreadable: {e}>\n"));
            let lines: Vec<&str> = text.lines().collect();
            let skip = lines.len().saturating_sub(Self::DUMP_LINES);
            let _ = writeln!(out, "----- {title}: {} -----", file.display());
            if skip > 0 {
                let _ = writeln!(out, "[... {skip} earlier lines ...]");
            }
            for line in &lines[skip..] {
                let _ = writeln!(out, "{line}");
            }
        }
        eprint!("{out}");
    }

    /// How many trailing lines of each file [`RunDir::dump_logs`] prints.
    pub const DUMP_LINES: usize = 300;
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if thread::panicking() || std::env::var_os("TESTNET_KEEP").is_some() {
            eprintln!("testnet: kept run dir {}", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Waits until `ready` returns true while `proc` keeps running.
///
/// # Panics
///
/// If `proc` exits first or `timeout` passes. The router guard prints the
/// logs as the panic unwinds through its drop.
pub(crate) fn wait_ready(
    proc: &mut Proc,
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) {
    let result = crate::wait_until(what, timeout, Duration::from_millis(20), || {
        if ready() {
            return Some(Ok(()));
        }
        proc.try_status().map(Err)
    });
    let failure = match result {
        Ok(Ok(())) => return,
        Ok(Err(status)) => format!("{} exited ({status}) before {what}", proc.label()),
        Err(timeout) => format!("{}: {timeout}", proc.label()),
    };
    panic!("testnet: {failure}");
}

/// `flb-<pid>-<counter>-<tag>`, unique within this process and, while it
/// lives, on this machine. The tag is cut to 16 characters of `[A-Za-z0-9_-]`.
pub(crate) fn unique_name(tag: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tag: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(16)
        .collect();
    format!("{NAME_PREFIX}{}-{n}-{tag}", std::process::id())
}

/// The PID that made a name of [`unique_name`]'s form, if it is one.
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix(NAME_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

pub(crate) const NAME_PREFIX: &str = "flb-";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        let a = unique_name("frr router!");
        let b = unique_name("frr router!");
        assert_ne!(a, b);
        assert!(a.ends_with("-frr-router-"), "{a}");
        assert_eq!(owner_pid(&a), Some(std::process::id()));
        assert_eq!(owner_pid("flbcap-12-fb-frr"), None);
        assert_eq!(owner_pid("flb-x-1-a"), None);
    }
}
