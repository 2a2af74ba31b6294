#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]
//! Evaluates `config/prometheus/alerts.yaml` with `promtool test rules`
//! on scraped exposition text: each sample becomes an input series (with
//! the target's `job`, `pod` and `container` labels, as Prometheus stores
//! a ServiceMonitor's scrape). Successive scrapes of one target are one
//! minute apart, and the last scraped value is held for ten minutes more;
//! each case lists the alerts expected to fire at 3 minutes (every rule
//! waits at most 2 minutes).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

/// The rules file ferrolb ships.
pub const RULES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../config/prometheus/alerts.yaml"
);

/// Where a scrape came from: the labels Prometheus adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub job: &'static str,
    pub pod: &'static str,
    pub container: &'static str,
}

/// An alert expected to fire: every label (the series' and the rule's)
/// and every annotation.
#[derive(Debug, Clone)]
pub struct Alert {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
}

/// Scrapes (a target's successive scrapes one minute apart), and for each
/// alert name the alerts expected (none: it must not fire).
pub struct Case {
    pub scraped: Vec<(Target, String)>,
    pub expect: Vec<(&'static str, Vec<Alert>)>,
}

/// `GET /metrics`: the body.
pub fn scrape(addr: SocketAddr) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    assert!(s.starts_with("HTTP/1.1 200"), "{s}");
    s.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap()
}

/// The input series of one target's scrapes, one minute apart:
/// `name{labels,target labels}` with a value per scrape (`_` where a
/// scrape lacks the series), the last one held.
pub fn series(target: Target, scrapes: &[&str]) -> Vec<Value> {
    let extra = format!(
        "job=\"{}\",pod=\"{}\",container=\"{}\"",
        target.job, target.pod, target.container
    );
    let mut by_series: std::collections::BTreeMap<String, Vec<Option<String>>> =
        std::collections::BTreeMap::new();
    for (i, text) in scrapes.iter().enumerate() {
        for l in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (metric, value) = l.rsplit_once(' ').unwrap();
            let metric = match metric.strip_suffix('}') {
                Some(open) => format!("{open},{extra}}}"),
                None => format!("{metric}{{{extra}}}"),
            };
            by_series
                .entry(metric)
                .or_insert_with(|| vec![None; scrapes.len()])[i] = Some(value.to_owned());
        }
    }
    by_series
        .into_iter()
        .map(|(metric, values)| {
            let mut text: Vec<String> = values
                .iter()
                .map(|v| v.clone().unwrap_or_else(|| "_".into()))
                .collect();
            match values.last().unwrap() {
                Some(last) => *text.last_mut().unwrap() = format!("{last}+0x10"),
                None => text.push("_x10".into()),
            }
            json!({ "series": metric, "values": text.join(" ") })
        })
        .collect()
}

/// Writes the test file under `dir` and runs promtool; the error is
/// promtool's report.
pub fn test_rules(promtool: &Path, dir: &Path, cases: &[Case]) -> Result<(), String> {
    let tests: Vec<Value> = cases
        .iter()
        .map(|c| {
            let mut targets: Vec<Target> = Vec::new();
            for (t, _) in &c.scraped {
                if !targets.contains(t) {
                    targets.push(*t);
                }
            }
            let input: Vec<Value> = targets
                .iter()
                .flat_map(|t| {
                    let scrapes: Vec<&str> = c
                        .scraped
                        .iter()
                        .filter(|(s, _)| s == t)
                        .map(|(_, text)| text.as_str())
                        .collect();
                    series(*t, &scrapes)
                })
                .collect();
            let alerts: Vec<Value> = c
                .expect
                .iter()
                .map(|(name, alerts)| {
                    let exp: Vec<Value> = alerts
                        .iter()
                        .map(|a| {
                            assert_eq!(a.name, *name);
                            let map = |kv: &[(String, String)]| {
                                kv.iter()
                                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                                    .collect::<serde_json::Map<_, _>>()
                            };
                            json!({
                                "exp_labels": map(&a.labels),
                                "exp_annotations": map(&a.annotations),
                            })
                        })
                        .collect();
                    json!({ "eval_time": "3m", "alertname": name, "exp_alerts": exp })
                })
                .collect();
            json!({ "interval": "1m", "input_series": input, "alert_rule_test": alerts })
        })
        .collect();
    let file = json!({
        "rule_files": [RULES],
        "evaluation_interval": "1m",
        "tests": tests,
    });
    rules_command(promtool, "test", &dir.join("test.json"), &file)
}

/// Writes `file` (JSON, which promtool reads as YAML) to `path` and runs
/// `promtool CHECK rules PATH` (`test` or `check`); the error is
/// promtool's report.
pub fn rules_command(
    promtool: &Path,
    check: &str,
    path: &Path,
    file: &Value,
) -> Result<(), String> {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(file).unwrap()).unwrap();
    let out = Command::new(promtool)
        .args([check, "rules"])
        .arg(path)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "promtool {check} rules {} failed:\n{}{}",
            path.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
