//! No silent task death (hardening issue 14, finding 1), against the real
//! speaker binary in file mode: a fault injected into one of its tasks
//! (`FERROLB_FAULT_INJECT`, compiled into test builds only, see
//! `shell::task`) must end the whole process with a failure status and the
//! cause in its log, never leave it running without the task, and never
//! pass for a clean shutdown (exit 0).
//!
//! - A panic anywhere is logged by the panic hook (message, location, the
//!   task's span) and the process aborts (SIGABRT), as with the release
//!   profiles' `panic = "abort"`.
//! - A supervised task that returns is logged with its name, the speaker
//!   shuts down as on SIGTERM and exits 1.
//!
//! `SPEAKER_BIN` runs the cases against another build (a binary without the
//! fault injection just keeps running: the cases fail).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A failsafe, not a measure: every case ends the process at its first
/// poll of the faulty task, within a second or so even on a loaded machine.
const FAILSAFE: Duration = Duration::from_secs(120);

/// This node and one BGP peer that nothing answers for: the peer's task
/// starts (and connects in vain) as soon as the configuration is read.
const CONFIG: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  addresses: [{type: InternalIP, address: 192.0.2.1}]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64500, peerAddress: 127.0.0.1, peerPort: 1}
";

struct Run {
    status: ExitStatus,
    log: Vec<Value>,
    text: String,
}

/// Runs the speaker with `fault` injected and `extra` flags until it exits.
fn run_with_fault(name: &str, fault: &str, extra: &[&str]) -> Run {
    let dir =
        std::env::temp_dir().join(format!("ferrolb-task-death-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.yaml"), CONFIG).unwrap();
    let log_path = dir.join("speaker.log");
    let bin = std::env::var("SPEAKER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_speaker").into());
    let mut child = Command::new(&bin)
        .args([
            "--node-name",
            "n1",
            "--config-dir",
            config.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
            // Only the server under test: no listener on MetalLB's probe port.
            "--health-probe-port",
            "0",
            "--log-format",
            "json",
            "--log-level",
            "info",
        ])
        .args(extra)
        .env("FERROLB_FAULT_INJECT", fault)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > FAILSAFE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "fault {fault:?}: the speaker still runs after {FAILSAFE:?}\n{}",
                tail(&log_path)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log_path).unwrap();
    let log = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    Run { status, log, text }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

impl Run {
    /// Every log line whose message is `message`.
    fn lines(&self, message: &str) -> Vec<&Value> {
        self.log
            .iter()
            .filter(|l| l["fields"]["message"] == message)
            .collect()
    }

    /// The panic hook's line: logged at error level with the message, the
    /// location and the task's span; the process then aborted.
    fn assert_panic_logged(&self, task_prefix: &str) {
        assert_eq!(
            self.status.signal(),
            Some(libc::SIGABRT),
            "the process must abort: {:?}\n{}",
            self.status,
            self.text
        );
        let panics = self.lines("panic: aborting");
        assert_eq!(panics.len(), 1, "{}", self.text);
        let p = panics[0];
        assert_eq!(p["level"], "ERROR");
        let message = p["fields"]["panic.message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("injected fault: task {task_prefix}")),
            "{message}"
        );
        let location = p["fields"]["panic.location"].as_str().unwrap();
        assert!(location.starts_with("shell/src/task.rs:"), "{location}");
        assert!(p["fields"]["task_id"].as_str().unwrap() != "none", "{p}");
        let tasks: Vec<&str> = p["spans"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["name"] == "task")
            .filter_map(|s| s["task"].as_str())
            .collect();
        assert!(
            tasks.iter().any(|t| t.starts_with(task_prefix)),
            "the panic's spans name the task: {p}"
        );
    }
}

#[test]
fn a_panic_in_a_bgp_peer_task_aborts_the_speaker_with_the_cause_logged() {
    let run = run_with_fault("bgp", "panic:bgp peer", &[]);
    run.assert_panic_logged("bgp peer router");
}

#[test]
fn a_panic_in_the_configuration_source_is_not_a_clean_shutdown() {
    // Before: the reconcile loop took the closed channel for a shutdown
    // request and the speaker exited 0.
    let run = run_with_fault("config-panic", "panic:configuration source", &[]);
    run.assert_panic_logged("configuration source");
    assert!(run.lines("shutting down").is_empty(), "{}", run.text);
}

#[test]
fn a_panic_in_the_memberlist_task_aborts_the_speaker() {
    let run = run_with_fault(
        "memberlist",
        "panic:memberlist",
        &["--memberlist-bind", "127.0.0.1:0"],
    );
    run.assert_panic_logged("memberlist");
}

#[test]
fn an_early_end_of_the_configuration_source_exits_1_with_the_task_named() {
    let run = run_with_fault("config-end", "end:configuration source", &[]);
    assert_eq!(run.status.code(), Some(1), "{:?}\n{}", run.status, run.text);
    let ended = run.lines("task ended unexpectedly");
    assert_eq!(ended.len(), 1, "{}", run.text);
    assert_eq!(ended[0]["fields"]["task"], "configuration source");
    assert_eq!(ended[0]["fields"]["cause"], "returned");
    assert_eq!(ended[0]["level"], "ERROR");
    // The speaker shut down in order (BGP Cease, memberlist leave), then
    // failed with the reason.
    let down = run.lines("a task the speaker needs ended: shutting down");
    assert_eq!(down.len(), 1, "{}", run.text);
    let failed = run.lines("speaker failed");
    assert_eq!(failed.len(), 1, "{}", run.text);
    let error = failed[0]["fields"]["error"].as_str().unwrap();
    // The loop may see the task's failure or its closed channel first.
    assert!(
        error == "task configuration source ended unexpectedly: returned"
            || error == "the configuration source ended",
        "{error}"
    );
}
