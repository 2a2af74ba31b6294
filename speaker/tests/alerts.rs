//! MetalLB's alerts (`config/prometheus/alerts.yaml`) evaluated by
//! Prometheus's own rule engine (`promtool test rules`, Debian package
//! `prometheus`) on what the real speaker exports: its scraped samples
//! become the test's input series, as a scrape by MetalLB's ServiceMonitor
//! would store them (with `job`, `pod` and `container` labels).
//!
//! The speaker runs in file mode with an invalid configuration first
//! (MetalLBConfigNotLoaded, MetalLBStaleConfig and FerrolbNotReady fire),
//! then a good one (none fires). A speaker whose memberlist seed never
//! answers fires ferrolb's FerrolbSpeakerIsolated. In a namespace lab, a
//! speaker whose BFD peer never answers fires FerrolbBFDSessionDown, and
//! one whose layer 2 Service comes and goes (it starts answering for the
//! address again each time) fires FerrolbL2OwnerFlapping; that speaker's
//! scrape also holds every metric the Grafana dashboard's speaker panels
//! read.
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub, dead_code)]

#[path = "faults/lab.rs"]
mod lab;

#[path = "../../shell/tests/support/hostile.rs"]
mod hostile;

#[path = "../../shell/tests/support/promtool.rs"]
mod promtool;

#[path = "../../shell/tests/support/dashboard.rs"]
mod dashboard;

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
            && value(t, "ferrolb_ready") == Some(1.0)
    });
    assert_eq!(value(&refused, "ferrolb_ready"), Some(0.0), "{refused}");
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
                (
                    "FerrolbNotReady",
                    vec![promtool::Alert {
                        name: "FerrolbNotReady".into(),
                        labels: warning_labels(target),
                        annotations: vec![
                            ("summary".into(), "speaker on speaker-x7k2p is not ready".into()),
                            (
                                "description".into(),
                                "ferrolb-speaker - ferrolb speaker on speaker-x7k2p has not been ready for > 2 minutes; its /readyz and ferrolb_component_ready name the component that is not".into(),
                            ),
                        ],
                    }],
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
                ("FerrolbNotReady", vec![]),
                ("FerrolbBFDSessionDown", vec![]),
                ("FerrolbL2OwnerFlapping", vec![]),
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

/// The lab's configuration: node n1 (10.0.0.2), a pool and an
/// L2Advertisement for 10.0.0.100, a BGPPeer at 10.0.0.1 (a namespace where
/// nothing listens) with a BFD profile, and, when `service`, the Service
/// `demo/web` holding 10.0.0.100 with an endpoint on n1.
fn lab_config(service: bool) -> String {
    let mut text = String::from(
        "apiVersion: v1
kind: Node
metadata: {name: n1}
status: {addresses: [{type: InternalIP, address: 10.0.0.2}]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec: {addresses: [10.0.0.100/32]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: fast, namespace: metallb-system}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: silent, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 10.0.0.1, bfdProfile: fast}
",
    );
    if service {
        text.push_str(
            "---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 10.0.0.100}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: demo
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
endpoints:
  - addresses: [10.244.1.5]
    nodeName: n1
    conditions: {ready: true}
",
        );
    }
    text
}

#[test]
fn bfd_down_and_l2_owner_flapping_alerts_from_a_speaker_in_the_lab() {
    let promtool_bin = testnet::require_binary("promtool");
    testnet::require_root();
    let run = testnet::RunDir::new("speaker-alerts-lab");
    let config = run.join("config");
    std::fs::create_dir_all(&config).unwrap();
    lab::write_config(&config, "all.yaml", &lab_config(true));
    let router = testnet::Netns::new("rtr");
    let node = testnet::Netns::new("n1");
    testnet::veth_pair(&router, "eth0", &node, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    node.add_addr("eth0", "10.0.0.2/24");
    let key = run.join("memberlist.key");
    std::fs::write(&key, format!("{}\n", "7".repeat(64))).unwrap();
    let speaker = lab::Speaker::start(
        &node,
        "n1",
        &config,
        &run,
        "10.0.0.2",
        &[
            "--memberlist-bind",
            "10.0.0.2:7946",
            "--memberlist-key-file",
            key.to_str().unwrap(),
        ],
    );
    let wait = |what: &str, done: &dyn Fn(&str) -> bool| -> String {
        testnet::wait_until(what, T, Duration::from_millis(100), || {
            let text = speaker.metrics_text();
            let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
            done(&body).then_some(body)
        })
        .unwrap_or_else(|e| {
            speaker.dump_log();
            panic!("{e}")
        })
    };
    let starts = |t: &str| {
        lab::metric_in(t, "ferrolb_layer2_owner_starts_total{ip=\"10.0.0.100\"}").unwrap_or(0.0)
    };
    // One scrape a minute, as Prometheus would: the first once the speaker
    // answers for the address (and its BFD session exists, down), then
    // one after every two more starts (the Service removed and restored).
    let mut scrapes = vec![wait("the first start and a BFD session", &|t| {
        starts(t) == 1.0 && t.contains("metallb_bfd_session_up{peer=")
    })];
    for round in 0..3 {
        for _ in 0..2 {
            let before = starts(scrapes.last().unwrap());
            lab::write_config(&config, "all.yaml", &lab_config(false));
            wait("the address given up", &|t| {
                !t.contains("metallb_speaker_announced{")
            });
            lab::write_config(&config, "all.yaml", &lab_config(true));
            let after = wait("the address taken again", &|t| {
                t.contains("metallb_speaker_announced{") && starts(t) > before
            });
            scrapes.push(after);
        }
        // Keep one scrape per round of two starts.
        let last = scrapes.pop().unwrap();
        scrapes.pop();
        scrapes.push(last);
        assert_eq!(starts(scrapes.last().unwrap()), f64::from(3 + 2 * round));
    }
    let bfd_down = scrapes.last().unwrap();
    assert!(
        bfd_down.contains("metallb_bfd_session_up{peer=\"10.0.0.1\"} 0\n"),
        "{bfd_down}"
    );
    let target = promtool::Target {
        job: "ferrolb-speaker",
        pod: "speaker-b9w4t",
        container: "speaker",
    };
    let flapping = promtool::Alert {
        name: "FerrolbL2OwnerFlapping".into(),
        labels: vec![
            ("ip".into(), "10.0.0.100".into()),
            ("severity".into(), "warning".into()),
        ],
        annotations: vec![
            ("summary".into(), "layer 2 owner of 10.0.0.100 flapping".into()),
            (
                "description".into(),
                // Samples 1, 3, 5, 7 at 0-3 min: 6 starts in 3 minutes,
                // which increase() extrapolates by half an interval (0.5
                // min) before the first sample: 6 * 3.5 / 3 = 7.
                "the node answering for 10.0.0.100 in layer 2 changed 7 times in 15 minutes (memberlist members coming and going, or speakers restarting); clients see a new MAC each time".into(),
            ),
        ],
    };
    let bfd = promtool::Alert {
        name: "FerrolbBFDSessionDown".into(),
        labels: vec![
            ("container".into(), "speaker".into()),
            ("job".into(), "ferrolb-speaker".into()),
            ("peer".into(), "10.0.0.1".into()),
            ("pod".into(), "speaker-b9w4t".into()),
            ("severity".into(), "warning".into()),
        ],
        annotations: vec![
            ("summary".into(), "BFD session down on speaker-b9w4t".into()),
            (
                "description".into(),
                "ferrolb-speaker - ferrolb speaker on speaker-b9w4t has BFD session 10.0.0.1 down for > 1 minute: the BGP session over it is held down".into(),
            ),
        ],
    };
    let cases = [
        promtool::Case {
            scraped: scrapes.iter().map(|t| (target, t.clone())).collect(),
            expect: vec![
                ("FerrolbL2OwnerFlapping", vec![flapping]),
                ("FerrolbBFDSessionDown", vec![bfd]),
                ("FerrolbNotReady", vec![]),
            ],
        },
        // The same address held all along: no flapping.
        promtool::Case {
            scraped: vec![(target, scrapes[0].clone())],
            expect: vec![("FerrolbL2OwnerFlapping", vec![])],
        },
    ];
    if let Err(e) = promtool::test_rules(&promtool_bin, &run.join("promtool"), &cases) {
        speaker.dump_log();
        panic!("{e}");
    }
    // The dashboard's speaker panels read what this speaker exports.
    if let Err(e) = dashboard::check(
        &promtool_bin,
        &run.join("promtool"),
        "Speakers",
        &[bfd_down.as_str()],
    ) {
        panic!("{e}\nscrape:\n{bfd_down}");
    }
}
