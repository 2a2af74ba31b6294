//! The documentation site (`docs/`, mdBook).
//!
//! - The generated configuration reference is current (as `api/tests/crds.rs`
//!   checks the CRDs): `cargo run -p ferrolb-tools --bin ferrolb-docs`
//!   regenerates it.
//! - `docs/src/operate/metrics.md` documents exactly the metrics the code
//!   exports, with their types, labels and program.
//! - Every troubleshooting page opens with its `kubectl ferrolb` command.
//! - The book builds; every internal link and anchor of the built HTML
//!   resolves; every page renders in headless Chromium with its content, its
//!   scripts run and no console message; screenshots of two pages are kept
//!   in `target/docs/screenshots/` (the target directory this test was built
//!   in).
//!
//! Needs mdBook (`scripts/install-mdbook`, which `scripts/test` runs) and
//! Chromium (Debian `chromium-headless-shell`, from `scripts/install-deps`):
//! without them the site test fails naming what is missing; it never skips,
//! under `CI=true` or not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

// --- the generated reference ------------------------------------------------

#[test]
fn reference_pages_are_current() {
    let root = root();
    let pages = ferrolb_tools::docs::generated(&root).unwrap();
    let mut drifted = Vec::new();
    for (rel, text) in &pages {
        if std::fs::read_to_string(root.join(rel)).ok().as_deref() != Some(text.as_str()) {
            drifted.push(rel.display().to_string());
        }
    }
    let mut present: Vec<String> = std::fs::read_dir(root.join(ferrolb_tools::docs::REFERENCE_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    present.sort();
    let mut expected: Vec<String> = pages
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    expected.sort();
    let regenerate = ferrolb_tools::docs::reference::REGENERATE;
    assert_eq!(
        present, expected,
        "docs/src/reference/ holds exactly the generated pages; run `{regenerate}`"
    );
    assert!(
        drifted.is_empty(),
        "the configuration reference is out of date for {drifted:?}: run `{regenerate}`"
    );
    // Each page is in the book's table of contents, or mdBook leaves it out.
    let summary = std::fs::read_to_string(root.join("docs/src/SUMMARY.md")).unwrap();
    for (rel, _) in &pages {
        let link = rel.strip_prefix("docs/src").unwrap().display().to_string();
        assert!(
            summary.contains(&format!("]({link})")),
            "docs/src/SUMMARY.md does not list {link}"
        );
    }
}

/// Each troubleshooting page opens with the `kubectl ferrolb` command that
/// diagnoses its symptom: right under the title, before any prose.
#[test]
fn troubleshooting_pages_start_with_the_diagnosing_command() {
    let dir = root().join("docs/src/troubleshooting");
    let mut pages = 0;
    for page in std::fs::read_dir(&dir).unwrap() {
        let path = page.unwrap().path();
        if path.file_name().is_some_and(|n| n == "index.md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let name = path.display();
        assert!(
            lines.next().is_some_and(|l| l.starts_with("# ")),
            "{name}: no title first"
        );
        assert_eq!(
            lines.next(),
            Some("```sh"),
            "{name}: no command block under the title"
        );
        let command = lines.next().unwrap_or("");
        assert!(
            command.starts_with("kubectl ferrolb "),
            "{name}: the first command is `{command}`, not kubectl ferrolb"
        );
        pages += 1;
    }
    assert!(pages >= 6, "only {pages} troubleshooting pages");
}

// --- metrics ----------------------------------------------------------------

/// A metric as the docs table or the code describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Metric {
    kind: String,
    labels: BTreeSet<String>,
    program: String,
}

#[test]
fn every_metric_is_documented_and_every_documented_metric_exists() {
    let root = root();
    let documented = documented_metrics(&root.join("docs/src/operate/metrics.md"));
    assert!(
        documented.len() > 50,
        "found only {} rows in the metrics table",
        documented.len()
    );

    // Every name the code can export: string literals and `# HELP` lines in
    // the programs' sources (so a metric added anywhere is seen).
    let mut in_source = BTreeSet::new();
    for dir in ["speaker/src", "controller/src", "shell/src"] {
        for file in rust_files(&root.join(dir)) {
            in_source.extend(metric_names_in(&std::fs::read_to_string(&file).unwrap()));
        }
    }
    let doc_names: BTreeSet<String> = documented.keys().cloned().collect();
    let undocumented: Vec<_> = in_source.difference(&doc_names).collect();
    let unknown: Vec<_> = doc_names.difference(&in_source).collect();
    assert!(
        undocumented.is_empty(),
        "metrics in the code but not in docs/src/operate/metrics.md: {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "metrics in docs/src/operate/metrics.md that the code does not export: {unknown:?}"
    );

    // Types, labels and program, from the exposition text the programs
    // render (every family filled in, so that every label shows).
    let speaker = families(&speaker_exposition());
    let controller = families(&controller_exposition());
    let health = shell::health::Health::new();
    let _component = health.component("configuration");
    let shared = families(&format!(
        "{}{}",
        health.report().render_metrics(),
        shell::procfs::render()
    ));
    let mut rendered: BTreeMap<String, Metric> = BTreeMap::new();
    for (program, fams) in [("speaker", &speaker), ("controller", &controller)] {
        for (name, (kind, labels)) in fams {
            let entry = rendered.entry(name.clone()).or_insert_with(|| Metric {
                kind: kind.clone(),
                labels: labels.clone(),
                program: program.into(),
            });
            if entry.program != program {
                entry.program = "both".into();
            }
            assert_eq!(
                (&entry.kind, &entry.labels),
                (kind, labels),
                "{name} differs between the programs"
            );
        }
    }
    for (name, (kind, labels)) in &shared {
        rendered.insert(
            name.clone(),
            Metric {
                kind: kind.clone(),
                labels: labels.clone(),
                program: "both".into(),
            },
        );
    }
    for (name, got) in &rendered {
        assert!(
            in_source.contains(name),
            "{name} is rendered but the source scan missed it"
        );
        assert_eq!(
            documented.get(name),
            Some(got),
            "docs/src/operate/metrics.md's row for {name} differs from what the code renders"
        );
    }
    // What cannot be rendered here (the HTTPS listener's counters start
    // with the listener) is still in the source scan above.
    assert!(
        rendered.len() + 3 >= documented.len(),
        "rendered {} of {} documented metrics",
        rendered.len(),
        documented.len()
    );
}

/// The rows of the metrics tables, `| `name` | type | `l1`, `l2` | meaning |`,
/// under the headings `### Speaker`, `### Controller` and `### Both programs`.
fn documented_metrics(path: &Path) -> BTreeMap<String, Metric> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = BTreeMap::new();
    let mut program = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            program = match heading {
                "Speaker" => Some("speaker"),
                "Controller" => Some("controller"),
                "Both programs" => Some("both"),
                _ => None,
            };
            continue;
        }
        if !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let name = cells[0].trim_start_matches("| ").trim_matches('`');
        if !is_metric_name(name) {
            continue;
        }
        assert!(cells.len() >= 4, "short row in the metrics table: {line}");
        let program = program.unwrap_or_else(|| panic!("{name}: not under a program's heading"));
        let labels = if cells[2] == "-" {
            BTreeSet::new()
        } else {
            cells[2]
                .split(',')
                .map(|l| l.trim().trim_matches('`').to_owned())
                .collect()
        };
        let metric = Metric {
            kind: cells[1].to_owned(),
            labels,
            program: program.to_owned(),
        };
        assert!(
            out.insert(name.to_owned(), metric).is_none(),
            "{name} is in the metrics table twice"
        );
    }
    out
}

/// The prefixes of the names the programs export: their own, MetalLB's,
/// the process's and controller-runtime's (the controller's stage
/// histograms).
const METRIC_PREFIXES: [&str; 5] = [
    "metallb_",
    "ferrolb_",
    "process_",
    "workqueue_",
    "controller_runtime_",
];

fn is_metric_name(s: &str) -> bool {
    METRIC_PREFIXES.iter().any(|p| s.starts_with(p))
        && !s.ends_with('_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Metric names in Rust source: whole string literals (`"metallb_x"`) and
/// the names after `# HELP ` in exposition text written inline.
fn metric_names_in(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = source.as_bytes();
    let word = |from: usize| {
        let end = bytes[from..]
            .iter()
            .position(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_'))
            .map_or(bytes.len(), |n| from + n);
        (&source[from..end], end)
    };
    for prefix in METRIC_PREFIXES {
        for (at, _) in source.match_indices(prefix) {
            let (name, end) = word(at);
            let quoted = at > 0 && bytes[at - 1] == b'"' && bytes.get(end) == Some(&b'"');
            let helped = source[..at].ends_with("# HELP ");
            if (quoted || helped) && is_metric_name(name) {
                out.insert(name.to_owned());
            }
        }
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out
}

/// Families of an exposition text: name -> (type, label names). A
/// histogram's `_bucket`, `_sum` and `_count` series are its family's,
/// and their `le` is no label of its own.
fn families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut out = series_families(text);
    let histograms: Vec<String> = out
        .iter()
        .filter(|(_, (kind, _))| kind == "histogram")
        .map(|(name, _)| name.clone())
        .collect();
    for name in histograms {
        for suffix in ["_bucket", "_sum", "_count"] {
            if let Some((_, mut labels)) = out.remove(&format!("{name}{suffix}")) {
                labels.remove("le");
                out.get_mut(&name).unwrap().1.extend(labels);
            }
        }
    }
    out
}

/// [`families`] before a histogram's series are folded into it.
fn series_families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.entry(name.to_owned()).or_default().0 = kind.to_owned();
        } else if !line.starts_with('#') && !line.is_empty() {
            let (series, _) = line.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                Some((n, l)) => (n, l.trim_end_matches('}')),
                None => (series, ""),
            };
            let entry = out.entry(name.to_owned()).or_default();
            for pair in labels.split("\",").filter(|p| !p.is_empty()) {
                entry.1.insert(pair.split_once('=').unwrap().0.to_owned());
            }
        }
    }
    out
}

/// The speaker's exposition with every family and label present.
fn speaker_exposition() -> String {
    use speaker::metrics::{BfdSessionMetrics, MemberlistMetrics, PeerMetrics, Snapshot};
    let ip: std::net::IpAddr = "192.0.2.10".parse().unwrap();
    let snap = Snapshot {
        node: "node1".into(),
        peers: BTreeMap::from([("192.0.2.1:179".into(), PeerMetrics::default())]),
        announced: speaker::metrics::Announced::of([(
            speaker::announce::Via::Bgp,
            speaker::announce::ObjectKey::new("ns", "svc"),
            ip,
        )]),
        l2: BTreeMap::from([(ip, l2::IpCounters::default())]),
        l2_starts: BTreeMap::from([(ip, 1)]),
        l2_dropped: BTreeMap::from([("rate_limited", 0)]),
        memberlist: Some(MemberlistMetrics::default()),
        bfd_sessions: BTreeMap::from([("192.0.2.1".into(), BfdSessionMetrics::default())]),
        l2_metallb_deferred: Some(0),
        ..Snapshot::default()
    };
    snap.render()
        + &speaker::metrics::render_heap(Some(0))
        + &speaker::metrics::render_trims(Some(speaker::metrics::HeapTrims::default()))
        + &speaker::publish::render_writes()
        + &speaker::source::k8s::render_relists()
}

/// The controller's exposition with one pool.
fn controller_exposition() -> String {
    let pool = controller::state::PoolCounts {
        name: "pool".into(),
        capacity: Default::default(),
        assigned: Default::default(),
        services: 0,
    };
    controller::metrics::render(&[pool], true, Default::default())
        + &controller::metrics::render_stages(&Default::default())
}

// --- the site -----------------------------------------------------------------

#[test]
fn site_builds_links_resolve_and_every_page_renders() {
    let root = root();
    let mdbook = require_mdbook(&root);
    let chromium = require_chromium();
    let target = target_dir();
    let book = target.join("docs/book");
    let shots = target.join("docs/screenshots");
    let _ = std::fs::remove_dir_all(&book);
    std::fs::create_dir_all(&shots).unwrap();

    let t0 = Instant::now();
    let build = Command::new(&mdbook)
        .arg("build")
        .arg(root.join("docs"))
        .arg("--dest-dir")
        .arg(&book)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&build.stderr);
    assert!(build.status.success(), "mdbook build failed:\n{log}");
    let complaints: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(
        complaints.is_empty(),
        "mdbook build complained:\n{}",
        complaints.join("\n")
    );
    let built = t0.elapsed();

    // Internal links: every href and src of every built page.
    let pages = html_files(&book);
    let ids: BTreeMap<PathBuf, BTreeSet<String>> = pages
        .iter()
        .map(|p| {
            (
                p.clone(),
                attributes(&std::fs::read_to_string(p).unwrap(), "id"),
            )
        })
        .collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        // 404.html is served from the site's root by a web server; its links
        // are written for that (site-url), not for its place in the tree.
        if page.ends_with("404.html") {
            continue;
        }
        let html = std::fs::read_to_string(page).unwrap();
        for attr in ["href", "src"] {
            for link in attributes(&html, attr) {
                if let Some(problem) = check_link(&book, page, &link, &ids) {
                    broken.push(format!(
                        "{}: {attr}=\"{link}\": {problem}",
                        page.strip_prefix(&book).unwrap().display()
                    ));
                }
                checked += 1;
            }
        }
    }
    // Files the style sheets load (fonts, images): a missing one renders
    // as a fallback without any console message.
    for css in files_with(&book, "css") {
        let text = std::fs::read_to_string(&css).unwrap();
        for url in css_urls(&text) {
            if url.starts_with("data:") || url.contains("://") {
                continue;
            }
            let path = url.split(['?', '#']).next().unwrap_or("");
            let target = normalize(&css.parent().unwrap().join(path));
            if !target.is_file() {
                broken.push(format!(
                    "{}: url({url}): no such file",
                    css.strip_prefix(&book).unwrap().display()
                ));
            }
            checked += 1;
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken internal links:\n{}",
        broken.len(),
        broken.join("\n")
    );

    // Every page of the table of contents, rendered.
    let content: Vec<PathBuf> = pages
        .iter()
        .filter(|p| {
            let name = p.file_name().unwrap();
            name != "404.html" && name != "print.html" && name != "toc.html"
        })
        .cloned()
        .collect();
    let summary = std::fs::read_to_string(root.join("docs/src/SUMMARY.md")).unwrap();
    let listed = summary.matches("](").count();
    assert_eq!(
        content.len(),
        listed,
        "built pages {content:?} differ from SUMMARY.md's {listed} entries"
    );
    let t1 = Instant::now();
    let failures: Vec<String> = std::thread::scope(|s| {
        let chunks: Vec<&[PathBuf]> = content.chunks(content.len().div_ceil(2)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let chromium = &chromium;
                let book = &book;
                s.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|p| render_problem(chromium, book, p).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} pages did not render:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let rendered = t1.elapsed();

    // Screenshots of two pages, against a blank page shot the same way: a
    // page with text, tables and a sidebar compresses far worse than blank.
    let blank = book.join("blank-for-test.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let blank_png = screenshot(&chromium, &blank, &target.join("docs/blank.png"));
    std::fs::remove_file(&blank).unwrap();
    for (page, name) in [
        ("index.html", "introduction.png"),
        (
            "reference/ipaddresspools.html",
            "reference-ipaddresspools.png",
        ),
    ] {
        let png = screenshot(&chromium, &book.join(page), &shots.join(name));
        assert!(
            png > blank_png * 4,
            "screenshot of {page} is {png} bytes, a blank page's {blank_png}: nothing drawn?"
        );
    }
    eprintln!(
        "docs: built in {built:?}, {checked} links in {} pages and the style sheets checked, {} pages rendered in {rendered:?}; screenshots in {}",
        pages.len(),
        content.len(),
        shots.display()
    );
}

/// The target directory this test binary was built in
/// (`<target>/debug/deps/docs-*`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn require_mdbook(root: &Path) -> PathBuf {
    let out = Command::new("bash")
        .arg(root.join("scripts/install-mdbook"))
        .arg("--check")
        .output()
        .unwrap();
    if !out.status.success() {
        panic!(
            "mdbook is missing: run `scripts/install-mdbook` (scripts/test does); it said: {} \
             (tests never skip, CI={})",
            String::from_utf8_lossy(&out.stderr).trim(),
            std::env::var("CI").unwrap_or_default()
        );
    }
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn require_chromium() -> PathBuf {
    for name in ["chromium-headless-shell", "chromium"] {
        let path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain([PathBuf::from("/usr/bin")])
            .map(|d| d.join(name))
            .find(|p| p.is_file());
        if let Some(p) = path {
            return p;
        }
    }
    panic!(
        "headless Chromium is missing (`chromium-headless-shell` or `chromium`, Debian package \
         `chromium-headless-shell`): `scripts/install-deps` installs it (tests never skip, CI={})",
        std::env::var("CI").unwrap_or_default()
    );
}

fn html_files(dir: &Path) -> Vec<PathBuf> {
    files_with(dir, "html")
}

/// Every file under `dir` whose name ends in `.ext`, sorted.
fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_with(&path, ext));
        } else if path.extension().is_some_and(|x| x == ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The targets of `url(...)` in a style sheet, without their quotes.
fn css_urls(css: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = css;
    while let Some(at) = rest.find("url(") {
        let value = &rest[at + 4..];
        let end = value.find(')').unwrap_or(value.len());
        out.push(value[..end].trim().trim_matches(['\'', '"']).to_owned());
        rest = &value[end..];
    }
    out
}

/// The values of every `name="..."` attribute (mdBook writes double quotes).
fn attributes(html: &str, name: &str) -> BTreeSet<String> {
    let needle = format!(" {name}=\"");
    let mut out = BTreeSet::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        let value = &rest[at + needle.len()..];
        let end = value.find('"').unwrap_or(value.len());
        out.insert(value[..end].replace("&amp;", "&"));
        rest = &value[end..];
    }
    out
}

/// Why an internal link does not resolve, or `None` when it does (or is
/// external).
fn check_link(
    book: &Path,
    page: &Path,
    link: &str,
    ids: &BTreeMap<PathBuf, BTreeSet<String>>,
) -> Option<String> {
    if link.contains("://") || link.starts_with("mailto:") || link.starts_with("javascript:") {
        return None;
    }
    let (path, fragment) = match link.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (link, None),
    };
    let path = path.split('?').next().unwrap_or("");
    let target = if path.is_empty() {
        page.to_path_buf()
    } else if let Some(abs) = path.strip_prefix('/') {
        book.join(abs)
    } else {
        page.parent().unwrap().join(path)
    };
    let target = normalize(&target);
    if !target.starts_with(book) {
        return Some("points outside the book".into());
    }
    let target = if target.is_dir() {
        target.join("index.html")
    } else {
        target
    };
    if !target.is_file() {
        return Some(format!(
            "no file {}",
            target.strip_prefix(book).unwrap_or(&target).display()
        ));
    }
    match fragment {
        Some(f) if !f.is_empty() => match ids.get(&target) {
            Some(set) if set.contains(f) => None,
            Some(_) => Some(format!("no id \"{f}\" in the target")),
            None => Some("an anchor into a file that is not a page".into()),
        },
        _ => None,
    }
}

/// `a/b/../c` -> `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn chromium_command(chromium: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    // Tests run as root, where Chromium's sandbox refuses to start.
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        "--window-size=1280,900",
        "--enable-logging=stderr",
        "--v=0",
    ]);
    cmd.stdin(Stdio::null());
    cmd
}

/// Renders one page and checks it: the DOM after the scripts ran has the
/// page's title as its heading and text in `<main>`; mdBook's script ran
/// (`class="js ..."` on `<html>`), highlight.js marked every code block; and
/// the console stayed silent (Chromium logs every console message and
/// uncaught exception as a `CONSOLE` line).
fn render_problem(chromium: &Path, book: &Path, page: &Path) -> Result<(), String> {
    let rel = page.strip_prefix(book).unwrap().display().to_string();
    let out = chromium_command(chromium)
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .map_err(|e| format!("{rel}: running {}: {e}", chromium.display()))?;
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{rel}: chromium exited with {}:\n{log}",
            out.status
        ));
    }
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    if !console.is_empty() {
        return Err(format!("{rel}: console messages:\n{}", console.join("\n")));
    }
    let html_tag = dom
        .find("<html")
        .map(|i| &dom[i..i + dom[i..].find('>').unwrap_or(0)]);
    if !html_tag.is_some_and(|t| t.contains("class=\"js") || t.contains(" js ")) {
        return Err(format!("{rel}: mdBook's script did not run ({html_tag:?})"));
    }
    let Some(main) = dom
        .split_once("<main>")
        .and_then(|(_, m)| m.split_once("</main>"))
        .map(|(m, _)| m)
    else {
        return Err(format!("{rel}: no <main> in the rendered page"));
    };
    let text = strip_tags(main);
    let words = text.split_whitespace().count();
    if words < 40 {
        return Err(format!(
            "{rel}: only {words} words in <main>: {}",
            text.trim()
        ));
    }
    if !main.contains("<h1") {
        return Err(format!("{rel}: no <h1> heading in <main>"));
    }
    if text.contains("Document not found") {
        return Err(format!("{rel}: mdBook's not-found page"));
    }
    if main.contains("{{#") {
        return Err(format!("{rel}: an mdBook directive was left unexpanded"));
    }
    let blocks = main.matches("<pre><code").count();
    let highlighted = main.matches("hljs").count();
    if highlighted < blocks {
        return Err(format!(
            "{rel}: {blocks} code blocks, {highlighted} highlighted by highlight.js"
        ));
    }
    Ok(())
}

fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Takes a screenshot of `page` into `png`; returns its size in bytes.
fn screenshot(chromium: &Path, page: &Path, png: &Path) -> u64 {
    let _ = std::fs::remove_file(png);
    let out = chromium_command(chromium)
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "screenshot of {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        png.display()
    );
    bytes.len() as u64
}
