//! The `process_*` metrics every Prometheus client library exports, read
//! from `/proc/self` (Linux only, as in the Go client).
//!
//! [`Process::parse`] is pure (the files' text in, values out) and
//! [`Process::render`] writes the exposition text; [`render`] reads the
//! files and does both, for the binaries to append to their own metrics.

use std::fmt::{self, Write as _};
use std::fs;

/// The values of one reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Process {
    /// User and system CPU time, in seconds (`process_cpu_seconds_total`).
    pub cpu_seconds: f64,
    /// Open file descriptors (`process_open_fds`).
    pub open_fds: u64,
    /// The soft limit on open files (`process_max_fds`); `None` when
    /// unlimited.
    pub max_fds: Option<u64>,
    /// Virtual memory size in bytes (`process_virtual_memory_bytes`).
    pub virtual_memory_bytes: u64,
    /// The soft limit on the address space in bytes
    /// (`process_virtual_memory_max_bytes`, -1 when unlimited as in the Go
    /// client).
    pub virtual_memory_max_bytes: Option<u64>,
    /// Resident set size in bytes (`process_resident_memory_bytes`).
    pub resident_memory_bytes: u64,
    /// When the process started, in seconds since the Unix epoch
    /// (`process_start_time_seconds`).
    pub start_time_seconds: f64,
}

/// What `/proc` gave that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// The text of the files one reading needs, and the system's constants.
#[derive(Debug, Clone, Copy)]
pub struct Files<'a> {
    /// `/proc/self/stat`.
    pub stat: &'a str,
    /// `/proc/self/limits`.
    pub limits: &'a str,
    /// `/proc/stat` (for `btime`, the boot time).
    pub system_stat: &'a str,
    /// Entries in `/proc/self/fd`.
    pub open_fds: u64,
    /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
    pub clock_ticks: u64,
    /// The page size in bytes (`sysconf(_SC_PAGESIZE)`).
    pub page_size: u64,
}

impl Process {
    /// Reads the values from the files' text (proc(5)).
    ///
    /// # Errors
    /// When a file lacks a field or a field is not a number.
    pub fn parse(files: &Files<'_>) -> Result<Self, ParseError> {
        // The command name is in parentheses and may hold spaces and
        // parentheses itself: the fields start after the last ')'.
        let rest = files
            .stat
            .rfind(')')
            .map(|at| &files.stat[at + 1..])
            .ok_or_else(|| ParseError("stat: no command name".into()))?;
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        // proc(5) numbers fields from 1; `rest` starts at field 3 (state).
        let field = |n: usize| -> Result<u64, ParseError> {
            let text = fields
                .get(n - 3)
                .ok_or_else(|| ParseError(format!("stat: no field {n}")))?;
            text.parse()
                .map_err(|_| ParseError(format!("stat: field {n} is not a number: {text:?}")))
        };
        if files.clock_ticks == 0 {
            return Err(ParseError("clock ticks per second is 0".into()));
        }
        let ticks = files.clock_ticks as f64;
        let boot: u64 = files
            .system_stat
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .ok_or_else(|| ParseError("/proc/stat: no btime".into()))?
            .trim()
            .parse()
            .map_err(|_| ParseError("/proc/stat: btime is not a number".into()))?;
        Ok(Self {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            open_fds: files.open_fds,
            max_fds: soft_limit(files.limits, "Max open files")?,
            virtual_memory_bytes: field(23)?,
            virtual_memory_max_bytes: soft_limit(files.limits, "Max address space")?,
            resident_memory_bytes: field(24)?.saturating_mul(files.page_size),
            start_time_seconds: boot as f64 + field(22)? as f64 / ticks,
        })
    }

    /// The exposition text, with the names, types and help of the Go
    /// client's process collector.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let limit = |v: Option<u64>| v.map_or(-1.0, |n| n as f64);
        for (name, kind, help, value) in [
            (
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                self.cpu_seconds,
            ),
            (
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                limit(self.max_fds),
            ),
            (
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                self.open_fds as f64,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                self.resident_memory_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                self.start_time_seconds,
            ),
            (
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                self.virtual_memory_bytes as f64,
            ),
            (
                "process_virtual_memory_max_bytes",
                "gauge",
                "Maximum amount of virtual memory available in bytes.",
                limit(self.virtual_memory_max_bytes),
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out
    }
}

/// The soft limit of the `/proc/self/limits` line starting with `name`;
/// `None` when unlimited.
fn soft_limit(limits: &str, name: &str) -> Result<Option<u64>, ParseError> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .ok_or_else(|| ParseError(format!("limits: no {name:?}")))?;
    match line.split_ascii_whitespace().next() {
        Some("unlimited") => Ok(None),
        Some(n) => n
            .parse()
            .map(Some)
            .map_err(|_| ParseError(format!("limits: {name:?} is not a number: {n:?}"))),
        None => Err(ParseError(format!("limits: {name:?} has no value"))),
    }
}

/// This process's `process_*` metrics, read now from `/proc/self`. Empty
/// (and logged at debug) when `/proc` cannot be read: the program's own
/// metrics are still served.
pub fn render() -> String {
    match read() {
        Ok(p) => p.render(),
        Err(e) => {
            tracing::debug!(error = %e, "process metrics unavailable");
            String::new()
        }
    }
}

fn read() -> Result<Process, Box<dyn std::error::Error>> {
    use nix::unistd::{SysconfVar, sysconf};
    let stat = fs::read_to_string("/proc/self/stat")?;
    let limits = fs::read_to_string("/proc/self/limits")?;
    let system_stat = fs::read_to_string("/proc/stat")?;
    // The directory's own descriptor, open while it is read, is counted
    // too, as in the Go client.
    let open_fds = fs::read_dir("/proc/self/fd")?.count() as u64;
    let constant = |var| -> Result<u64, Box<dyn std::error::Error>> {
        let n = sysconf(var)?.ok_or("sysconf: no value")?;
        Ok(u64::try_from(n)?)
    };
    Ok(Process::parse(&Files {
        stat: &stat,
        limits: &limits,
        system_stat: &system_stat,
        open_fds,
        clock_ticks: constant(SysconfVar::CLK_TCK)?,
        page_size: constant(SysconfVar::PAGE_SIZE)?,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4876 (a (b) c) R 4872 4872 1492 0 -1 4194304 99 0 0 0 \
        250 150 0 0 20 0 1 0 2805845 3133440 358 18446744073709551615 0";
    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max cpu time              unlimited            unlimited            seconds   \n\
        Max address space         unlimited            unlimited            bytes     \n\
        Max open files            1024                 524288               files     \n";
    const SYSTEM: &str = "cpu  1 2 3\nbtime 1764000000\nprocesses 5\n";

    fn files() -> Files<'static> {
        Files {
            stat: STAT,
            limits: LIMITS,
            system_stat: SYSTEM,
            open_fds: 12,
            clock_ticks: 100,
            page_size: 4096,
        }
    }

    #[test]
    fn parses_proc_fields() {
        let p = Process::parse(&files()).unwrap();
        assert_eq!(
            p,
            Process {
                cpu_seconds: 4.0,
                open_fds: 12,
                max_fds: Some(1024),
                virtual_memory_bytes: 3_133_440,
                virtual_memory_max_bytes: None,
                resident_memory_bytes: 358 * 4096,
                start_time_seconds: 1_764_000_000.0 + 28_058.45,
            }
        );
    }

    #[test]
    fn renders_go_client_names() {
        let text = Process::parse(&files()).unwrap().render();
        for line in [
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 4\n",
            "# TYPE process_open_fds gauge\nprocess_open_fds 12\n",
            "# TYPE process_max_fds gauge\nprocess_max_fds 1024\n",
            "process_resident_memory_bytes 1466368\n",
            "process_virtual_memory_bytes 3133440\n",
            "process_virtual_memory_max_bytes -1\n",
            "process_start_time_seconds 1764028058.45\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        let cases: [(Files<'static>, &str); 4] = [
            (
                Files {
                    stat: "12 noparens",
                    ..files()
                },
                "stat: no command name",
            ),
            (
                Files {
                    stat: "12 (x) R 1 2",
                    ..files()
                },
                "stat: no field 14",
            ),
            (
                Files {
                    system_stat: "cpu 1\n",
                    ..files()
                },
                "/proc/stat: no btime",
            ),
            (
                Files {
                    limits: "Max open files  many  many files\n",
                    ..files()
                },
                "limits: \"Max open files\" is not a number: \"many\"",
            ),
        ];
        for (f, want) in cases {
            assert_eq!(Process::parse(&f).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn reads_this_process() {
        let p = read().unwrap();
        // This test's own descriptors: standard streams at least.
        assert!(p.open_fds >= 3, "{p:?}");
        assert!(p.resident_memory_bytes > 0, "{p:?}");
        assert!(p.virtual_memory_bytes >= p.resident_memory_bytes, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now (a second of slack for the boot time's
        // rounding to whole seconds in /proc/stat).
        assert!(p.start_time_seconds <= now + 1.0, "{p:?} {now}");
        assert!(render().contains("\nprocess_open_fds "));
    }
}
