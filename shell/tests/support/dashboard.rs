#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]
//! Checks `config/grafana/ferrolb.json` against what the programs export:
//! every query of a row's panels names only metrics that a real scrape
//! has samples of, and promtool parses every query. Needs the
//! `promtool` support module beside it.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};

/// The dashboard ferrolb ships.
pub const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../config/grafana/ferrolb.json"
);

/// The queries of the panels under the row titled `row` (up to the next
/// row), in order.
pub fn queries(row: &str) -> Vec<String> {
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(DASHBOARD).unwrap()).unwrap();
    let mut current = None;
    let mut out = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            current = p["title"].as_str().map(str::to_owned);
            continue;
        }
        if current.as_deref() == Some(row) {
            for t in p["targets"].as_array().unwrap() {
                out.push(t["expr"].as_str().unwrap().to_owned());
            }
        }
    }
    out
}

/// The metric names an expression reads: its identifiers with one of the
/// programs' prefixes (labels and functions have none).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| {
            ["metallb_", "ferrolb_", "process_"]
                .iter()
                .any(|p| w.starts_with(p))
        })
        .map(str::to_owned)
        .collect()
}

/// The metric names with samples in a scrape.
pub fn sampled(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// Checks the row's queries against `scrapes` and promtool's parser.
pub fn check(promtool: &Path, dir: &Path, row: &str, scrapes: &[&str]) -> Result<(), String> {
    let queries = queries(row);
    if queries.is_empty() {
        return Err(format!(
            "no panel queries under the row {row:?} of {DASHBOARD}"
        ));
    }
    let have: BTreeSet<String> = scrapes.iter().flat_map(|s| sampled(s)).collect();
    let mut missing = Vec::new();
    for q in &queries {
        let names = metric_names(q);
        if names.is_empty() {
            missing.push(format!("{q:?} reads no ferrolb or MetalLB metric"));
        }
        for n in names.iter().filter(|n| !have.contains(*n)) {
            missing.push(format!("{n} (in {q:?}) is not in the scrape"));
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "dashboard row {row:?}:\n  {}",
            missing.join("\n  ")
        ));
    }
    let rules = json!({"groups": [{
        "name": "dashboard",
        "rules": queries.iter().enumerate()
            .map(|(i, q)| json!({"record": format!("dashboard:query{i}"), "expr": q}))
            .collect::<Vec<_>>(),
    }]});
    let path = dir.join("dashboard-queries.json");
    crate::promtool::rules_command(promtool, "check", &path, &rules)
        .map_err(|e| format!("the dashboard's {row:?} queries: {e}"))
}
