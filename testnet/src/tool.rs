//! A lab tool (`ferrolb-bgp`, `ferrolb-bfd`, `ferrolb-l2`,
//! `ferrolb-memberlist`, ...) run inside a namespace: commands go to its
//! stdin one per line, and each stdout line is one JSON event.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Instant;

use serde_json::Value;

use crate::{Netns, Proc};

/// A running tool and the events it printed.
///
/// Every event received is appended to [`seen`](Self::seen), in order, so
/// a test can wait for "the next one after index `from`" or look back.
pub struct JsonTool {
    /// The process (killed by PID on drop).
    pub proc: Proc,
    /// Every event received so far, oldest first.
    pub seen: Vec<Value>,
    stdin: ChildStdin,
    events: mpsc::Receiver<Value>,
}

impl JsonTool {
    /// Spawns `cmd` inside `ns` with stdin and stdout piped; stderr is the
    /// caller's to set (a log file). Lines of stdout that are not JSON are
    /// printed to the test's stderr under `label`.
    pub fn spawn(ns: &Netns, cmd: &mut Command, label: &str) -> Self {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut proc = ns.spawn_command(cmd);
        let (Some(stdin), Some(stdout)) = (proc.take_stdin(), proc.take_stdout()) else {
            panic!("testnet: {label}: stdin and stdout are piped but not there");
        };
        let (tx, events) = mpsc::channel();
        let label = label.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(_) => eprintln!("{label} stdout: {line}"),
                }
            }
        });
        Self {
            proc,
            seen: Vec::new(),
            stdin,
            events,
        }
    }

    /// Sends one command line.
    ///
    /// # Panics
    /// If the tool's stdin is closed (it exited).
    pub fn send(&mut self, line: &str) {
        if let Err(e) = writeln!(self.stdin, "{line}").and_then(|()| self.stdin.flush()) {
            panic!(
                "testnet: sending {line:?} to the tool (pid {}): {e}",
                self.proc.pid()
            );
        }
    }

    /// Moves every event printed so far into `seen`, without waiting.
    pub fn poll(&mut self) {
        while let Ok(v) = self.events.try_recv() {
            self.seen.push(v);
        }
    }

    /// The next event, appended to `seen` and returned, or `None` if none
    /// came by `deadline` (or the tool's stdout closed).
    pub fn next(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(left) {
            Ok(v) => {
                self.seen.push(v.clone());
                Some(v)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The first event at index `from` or later in `seen` (received or to
    /// come) that matches `pred`, or `None` at `deadline`. `from =
    /// seen.len()` ignores everything received so far.
    pub fn wait_from(
        &mut self,
        from: usize,
        deadline: Instant,
        pred: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        self.poll();
        if let Some(v) = self.seen.iter().skip(from).find(|v| pred(v)) {
            return Some(v.clone());
        }
        loop {
            let v = self.next(deadline)?;
            if self.seen.len() > from && pred(&v) {
                return Some(v);
            }
        }
    }
}
