//! Issue 18 §1: what the metrics keep to render
//! `metallb_speaker_announced` (one line per announced IP) at 10,000 and
//! 50,000 Services, beyond what the reconcile loop holds anyway (the
//! keyed plans), and what a scrape of those lines costs: its time, the
//! longest it holds the speaker's one thread at once, and the live heap
//! it adds while it runs. The objects are the parent module's
//! (`ferrolb-loadgen fill`'s shapes), decided by the keyed plans as the
//! reconcile loop does (BGP only).
//!
//! Both ways, on the same objects in one process: the set main kept (a
//! `(Via, ObjectKey, IpAddr)` per IP, filled from the update's changes as
//! main's run loop did, its lines rendered into one `String`), and
//! [`Announced`] (the keyed plans' announcements and the view's list of
//! services, shared; its lines written a piece at a time as the server
//! sends them). One command:
//!
//! ```sh
//! HEAP_SERVICES=10000,50000 cargo test --release -p speaker --lib \
//!     metrics_announced_at_scale -- --ignored --nocapture
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::announce::ObjectKey;
use crate::metrics::{Announced, Snapshot};

/// The figures of one way at one size.
struct Figures {
    /// Lines of `metallb_speaker_announced`.
    lines: usize,
    /// Live heap the metrics' announced state adds, in bytes: what
    /// dropping it frees once the view is gone (the keyed plans hold the
    /// services' keys, records and announcements either way).
    state: i64,
    /// The lines' bytes.
    text: usize,
    /// The whole render (the stream: measured, then written).
    render: Duration,
    /// The longest the thread is held by the render at once.
    held: Duration,
    /// The most live heap the render added at once, in bytes.
    transient: i64,
}

/// The lines of a set of (protocol, service, IP), one `String`, as main's
/// `Snapshot::render` wrote them.
fn lines_of_a_set(node: &str, set: &BTreeSet<(crate::announce::Via, ObjectKey, IpAddr)>) -> String {
    let mut out = String::new();
    for (protocol, service, ip) in set {
        let _ = writeln!(
            out,
            "metallb_speaker_announced{{ip=\"{ip}\",node=\"{}\",protocol=\"{}\",service=\"{}\"}} 1",
            shell::metrics::escape(node),
            protocol.as_str(),
            shell::metrics::escape(&service.to_string())
        );
    }
    out
}

fn measure_metrics(services: u32) -> (Figures, Figures) {
    let mut rng = SmallRng::seed_from_u64(18);
    let mut interner = Interner::default();
    let nodes = stored((0..NODES).map(node), |n| {
        stored::Node::from_watched(n, &mut interner)
    });
    let mut interner = Interner::default();
    let svcs = stored((0..services).map(service), |s| {
        stored::Service::from_watched(s, &mut interner)
    });
    let slices = stored_slices(services, &mut rng, &mut interner);
    let (nl, sv, sl) = (nodes.list(), svcs.list(), slices.list());
    let secrets: Shared<Secret> = Arc::default();
    let mut converted = Converted::default();
    let (mut view, problems) = converted.view("node-00000", model(), &nl, &sv, &sl, &secrets);
    assert!(problems.is_empty(), "{problems:?}");
    let mut keyed = Keyed::new();
    let changes = keyed.update(&view, false);
    assert_eq!(changes.decided, usize::try_from(services).unwrap());
    let announcements = Arc::clone(keyed.announcements());
    assert!(!announcements.is_empty());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let node = "node-00000";

    // Main: the set, filled from the changes as main's run loop did, its
    // lines rendered at once.
    let mut set = BTreeSet::new();
    for a in &changes.announced {
        set.insert(a.clone());
    }
    let len = set.len();
    crate::announce::sorted::repack(&mut set, changes.announced.len(), len);
    drop(changes);
    let with = heap();
    let start = Instant::now();
    let whole = lines_of_a_set(node, &set);
    let render = start.elapsed();
    let transient = heap() - with;
    let lines = set.len();
    let before = heap();
    drop(set);
    let main = Figures {
        lines,
        state: before - heap(),
        text: whole.len(),
        render,
        held: render,
        transient,
    };

    // The branch: the keyed plans' announcements and the view's list, as
    // the run loop now keeps them (the view dropped then), the lines
    // measured and then written a piece at a time, each piece dropped
    // once "sent", as the server does.
    let mut list = std::mem::take(&mut view.services);
    list.shrink_to_fit();
    drop(view);
    let snap = Snapshot {
        node: node.into(),
        announced: Announced {
            announcements,
            services: Arc::new(list),
        },
        ..Snapshot::default()
    };
    let with = heap();
    let start = Instant::now();
    let mut exposition = snap.exposition();
    let measured = runtime.block_on(exposition.measure());
    let (mut held, mut transient, mut sent) = (Duration::ZERO, 0, 0);
    loop {
        let at = Instant::now();
        let Some(piece) = exposition.next_piece() else {
            break;
        };
        held = held.max(at.elapsed());
        transient = transient.max(heap() - with);
        sent += piece.len();
        drop(piece);
    }
    let render = start.elapsed();
    assert_eq!(measured, sent as u64);
    drop(exposition);
    // The same lines as the set's, byte for byte, where they were.
    let full = snap.render();
    assert!(full.contains(&format!(
        "# TYPE metallb_speaker_announced gauge\n{whole}# HELP metallb_layer2_requests_received "
    )));
    assert_eq!(full.len(), sent);
    let lines = snap.announced.triples().len();
    drop((full, whole));
    let before = heap();
    drop(snap);
    let branch = Figures {
        lines,
        state: before - heap(),
        text: sent,
        render,
        held,
        transient,
    };
    (main, branch)
}

#[test]
#[ignore = "a benchmark: cargo test --release -p speaker --lib metrics_announced_at_scale -- --ignored --nocapture"]
fn metrics_announced_at_scale() {
    println!(
        "| Services | way | announced lines | metrics' announced state | per line | text | render | thread held at once | render's live heap, at most |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let sizes: Vec<u32> = std::env::var("HEAP_SERVICES")
        .unwrap_or_else(|_| "10000,50000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("HEAP_SERVICES: numbers"))
        .collect();
    for services in sizes {
        let (main, branch) = measure_metrics(services);
        assert_eq!(main.lines, branch.lines);
        for (way, f) in [
            ("main's set, one String", main),
            ("shared, streamed", branch),
        ] {
            let mib = |b: i64| format!("{:.2} MiB", b as f64 / 1_048_576.0);
            println!(
                "| {services} | {way} | {} | {} | {:.1} B | {:.2} MB | {:.1} ms | {:.2} ms | {} |",
                f.lines,
                mib(f.state),
                f.state as f64 / f.lines as f64,
                f.text as f64 / 1e6,
                f.render.as_secs_f64() * 1e3,
                f.held.as_secs_f64() * 1e3,
                mib(f.transient),
            );
        }
    }
}
