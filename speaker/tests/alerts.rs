//! MetalLB's alerts (`config/prometheus/alerts.yaml`) evaluated by
//! Prometheus's own rule engine (`promtool test rules`, Debian package
//! `prometheus`) on what the real speaker exports: its scraped samples
//! become the test's input series, as a scrape by MetalLB's ServiceMonitor
//! would store them (with `job`, `pod` and `container` labels).
//!
//! The speaker runs in file mode with an invalid configuration first
//! (MetalLBConfigNotLoaded and MetalLBStaleConfig fire), then a good one
//! (neither fires). A speaker whose memberlist seed never answers fires
//! ferrolb's FerrolbSpeakerIsolated.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;

#[path = "../../shell/tests/support/promtool.rs"]
mod promtool;

use std::time::{Duration, Instant};

use hostile::{Process, TempDir};

const T: Duration = Duration::from_secs(60);

const NODE: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  addresses: [{type: InternalIP, address: 192.0.2.1}]
";

/// A pool whose range is not an address range: refused.
const BAD: &str = "
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec:
  addresses: [198.51.100.300-198.51.100.1]
";

const GOOD: &str = "
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec:
  addresses: [198.51.100.0/24]
";

/// The value of the unlabelled sample `name` in `text`.
fn value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// The speaker in file mode under `dir`: its configuration directory
/// (the node and `pool`), the process with `extra` flags, and its metrics
/// address.
fn speaker(
    dir: &TempDir,
    pool: &str,
    extra: &[&str],
) -> (std::path::PathBuf, Process, std::net::SocketAddr) {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("node.yaml"), NODE).unwrap();
    std::fs::write(config.join("pool.yaml"), pool).unwrap();
    let mut args = vec![
        "--node-name",
        "n1",
        "--config-dir",
        config.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
        "--health-probe-port",
        "0",
        "--log-format",
        "json",
    ];
    args.extend_from_slice(extra);
    let mut p = Process::start(
        env!("CARGO_BIN_EXE_speaker"),
        &args,
        dir.join("speaker.log"),
    );
    let addr = hostile::server(&mut p, T).addr;
    (config, p, addr)
}

/// A warning alert's labels for `target`, as the scrape labels it.
fn warning_labels(target: promtool::Target) -> Vec<(String, String)> {
    vec![
        ("severity".into(), "warning".into()),
        ("job".into(), target.job.into()),
        ("pod".into(), target.pod.into()),
        ("container".into(), target.container.into()),
    ]
}

/// Scrapes until `done` holds for the exposition text, up to `T`.
fn scrape_until(
    p: &mut Process,
    addr: std::net::SocketAddr,
    done: impl Fn(&str) -> bool,
) -> String {
    let t0 = Instant::now();
    loop {
        let text = promtool::scrape(addr);
        if done(&text) {
            return text;
        }
        if !p.alive() || t0.elapsed() > T {
            p.dump_log();
            panic!("the metrics never showed what the test waits for:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn metallb_config_alerts_follow_the_speakers_configuration() {
    let promtool_bin = testnet::require_binary("promtool");
    let dir = TempDir::new("speaker-alerts");
    let (config, mut p, addr) = speaker(&dir, BAD, &["--reload-interval-ms", "100"]);

    let refused = scrape_until(&mut p, addr, |t| {
        value(t, "metallb_k8s_client_update_errors_total").is_some_and(|n| n >= 1.0)
    });
    assert_eq!(
        value(&refused, "metallb_k8s_client_config_loaded_bool"),
        Some(0.0)
    );
    assert!(
        refused.contains("\nprocess_cpu_seconds_total "),
        "{refused}"
    );

    std::fs::write(config.join("pool.yaml"), GOOD).unwrap();
    let loaded = scrape_until(&mut p, addr, |t| {
        value(t, "metallb_k8s_client_config_loaded_bool") == Some(1.0)
    });
    assert_eq!(
        value(&loaded, "metallb_k8s_client_config_stale_bool"),
        Some(0.0)
    );

    let target = promtool::Target {
        job: "ferrolb-speaker",
        pod: "speaker-x7k2p",
        container: "speaker",
    };
    let config_alert = |name: &str, what: &str| promtool::Alert {
        name: name.to_owned(),
        labels: warning_labels(target),
        annotations: vec![
            (
                "summary".into(),
                match name {
                    "MetalLBStaleConfig" => "Stale config on speaker-x7k2p".into(),
                    _ => "Config on speaker-x7k2p has not been loaded".into(),
                },
            ),
            (
                "description".into(),
                format!("ferrolb-speaker - MetalLB speaker on speaker-x7k2p {what} for > 1 minute"),
            ),
        ],
    };
    let cases = [
        promtool::Case {
            scraped: vec![(target, refused.clone())],
            expect: vec![
                (
                    "MetalLBStaleConfig",
                    vec![config_alert("MetalLBStaleConfig", "has a stale config")],
                ),
                (
                    "MetalLBConfigNotLoaded",
                    vec![config_alert("MetalLBConfigNotLoaded", "has not loaded")],
                ),
            ],
        },
        promtool::Case {
            scraped: vec![(target, loaded.clone())],
            expect: vec![
                ("MetalLBStaleConfig", vec![]),
                ("MetalLBConfigNotLoaded", vec![]),
                ("MetalLBBGPSessionDown", vec![]),
                ("FerrolbSpeakerIsolated", vec![]),
            ],
        },
    ];
    let out = promtool::test_rules(&promtool_bin, &dir.join("promtool"), &cases);
    if let Err(e) = out {
        p.dump_log();
        panic!("{e}");
    }
}

/// A free port on 127.0.0.1 for both UDP and TCP (memberlist binds both).
fn free_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

#[test]
fn ferrolb_isolated_alert_fires_for_a_speaker_whose_seed_never_answers() {
    let promtool_bin = testnet::require_binary("promtool");
    let dir = TempDir::new("speaker-alerts-isolated");
    let key = dir.join("memberlist.key");
    std::fs::write(&key, format!("{}\n", "5".repeat(64))).unwrap();
    let bind = format!("127.0.0.1:{}", free_port());
    let (_config, mut p, addr) = speaker(
        &dir,
        GOOD,
        &[
            "--memberlist-bind",
            &bind,
            "--memberlist-key-file",
            key.to_str().unwrap(),
            // The discard port: nothing answers there.
            "--memberlist-join",
            "127.0.0.1:9",
        ],
    );
    let isolated = scrape_until(&mut p, addr, |t| {
        value(t, "ferrolb_memberlist_isolated") == Some(1.0)
    });
    let target = promtool::Target {
        job: "ferrolb-speaker",
        pod: "speaker-q4m8z",
        container: "speaker",
    };
    let alert = promtool::Alert {
        name: "FerrolbSpeakerIsolated".into(),
        labels: warning_labels(target),
        annotations: vec![
            ("summary".into(), "memberlist isolated on speaker-q4m8z".into()),
            (
                "description".into(),
                "ferrolb-speaker - ferrolb speaker on speaker-q4m8z has reached no memberlist member for > 1 minute (a wrong memberlist key, or port 7946 blocked): its layer 2 elections follow the speakers the API shows Ready".into(),
            ),
        ],
    };
    let cases = [promtool::Case {
        scraped: vec![(target, isolated)],
        expect: vec![
            ("FerrolbSpeakerIsolated", vec![alert]),
            ("MetalLBStaleConfig", vec![]),
        ],
    }];
    if let Err(e) = promtool::test_rules(&promtool_bin, &dir.join("promtool"), &cases) {
        p.dump_log();
        panic!("{e}");
    }
}
