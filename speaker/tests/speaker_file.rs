//! The `speaker` binary in file mode, end to end: three node namespaces
//! each run `speaker` on one shared configuration directory
//! (`testdata/speaker/bgp`), and an FRR router on the same segment learns
//! the service routes from all of them (ECMP), follows configuration
//! changes, and sees a Cease when a speaker is stopped. In layer 2 mode
//! (`testdata/speaker/l2`), the elected speaker answers a client's ARP.
//! BGPPeer `localASN` against FRR and BIRD: the routers peer with the local
//! AS and install the routes with it as their AS_PATH, the same AS_PATH FRR
//! sends when configured as MetalLB's FRR mode configures it. A 4-octet
//! myASN towards BIRD as a 2-octet speaker (`enable as4 off`): BIRD reads
//! the real AS from the AS4_PATH we send (RFC 6793). `ebgpMultiHop`,
//! `dynamicASN`, `sourceAddress`, `routerID`, `holdTime` and `disableMP`
//! against FRR, as FRR sees them; `connectTime` as the spacing of our
//! connection attempts; `vrf` as the device the session's socket is bound
//! to. `interface` (BGP unnumbered) against FRR's `neighbor IFACE
//! interface`, over two links, in both directions, through a link flap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use testnet::{Bird, Bridge, Frr, Netns, Proc, RunDir, veth_pair, wait_until};

const T: Duration = Duration::from_secs(30);
/// Deadline for a configuration change to reach the router: it only
/// bounds a failure (BENCHMARKS.md has the figures).
const CHANGE: Duration = T;

const FRR_CONF: &str = "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 bgp bestpath as-path multipath-relax
 neighbor 10.0.0.2 remote-as 64512
 neighbor 10.0.0.3 remote-as 64512
 neighbor 10.0.0.4 remote-as 64512
 address-family ipv4 unicast
  maximum-paths 8
 exit-address-family
";

struct Node {
    ns: Netns,
    proc: Proc,
    log: PathBuf,
}

impl Node {
    fn start(bridge: &Bridge, name: &str, addr: &str, dir: &Path, logs: &RunDir) -> Self {
        Self::start_with(bridge, name, addr, dir, logs, &[])
    }

    fn start_with(
        bridge: &Bridge,
        name: &str,
        addr: &str,
        dir: &Path,
        logs: &RunDir,
        extra: &[&str],
    ) -> Self {
        Self::start_caps(bridge, name, addr, dir, logs, extra, None)
    }

    /// As [`Node::start_with`]; with `caps`, the speaker runs as root with
    /// only these capabilities (`setpriv` empties the bounding set but for
    /// them, so they are all root gets at exec), as in the DaemonSet.
    fn start_caps(
        bridge: &Bridge,
        name: &str,
        addr: &str,
        dir: &Path,
        logs: &RunDir,
        extra: &[&str],
        caps: Option<&[&str]>,
    ) -> Self {
        let ns = Netns::new(name);
        bridge.attach(&ns, "eth0");
        ns.add_addr("eth0", &format!("{addr}/24"));
        Self::spawn(ns, name, dir, logs, extra, caps)
    }

    /// Runs the speaker as node `name` in `ns`, however its links are
    /// made.
    fn spawn(
        ns: Netns,
        name: &str,
        dir: &Path,
        logs: &RunDir,
        extra: &[&str],
        caps: Option<&[&str]>,
    ) -> Self {
        let log = logs.join(&format!("{name}.log"));
        let stderr = std::fs::File::create(&log).unwrap();
        let mut cmd = match caps {
            None => ns.command(env!("CARGO_BIN_EXE_speaker")),
            Some(caps) => {
                let set: String = std::iter::once("-all".to_owned())
                    .chain(caps.iter().map(|c| format!("+{c}")))
                    .collect::<Vec<_>>()
                    .join(",");
                let mut cmd = ns.command("setpriv");
                cmd.args([
                    format!("--bounding-set={set}"),
                    "--inh-caps=-all".to_owned(),
                    "--".to_owned(),
                ])
                .arg(env!("CARGO_BIN_EXE_speaker"));
                cmd
            }
        };
        cmd.env("NODE_NAME", name)
            .args(["--config-dir".as_ref(), dir.as_os_str()])
            .args(["--metrics-addr", "127.0.0.1:7472", "--log-level", "debug"])
            .args(["--reload-interval-ms", "200"])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(stderr);
        let proc = ns.spawn_command(&mut cmd);
        Self { ns, proc, log }
    }

    /// The body of `GET /metrics` inside the node's namespace, empty when
    /// the speaker does not answer (yet).
    fn metrics(&self) -> String {
        self.get("/metrics")
    }

    /// The whole response to `GET path`, empty when nobody answers.
    fn get(&self, path: &str) -> String {
        self.ns.run_in(|| {
            let Ok(mut c) = std::net::TcpStream::connect("127.0.0.1:7472") else {
                return String::new();
            };
            let mut s = String::new();
            if c.write_all(format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").as_bytes())
                .is_ok()
            {
                let _ = c.read_to_string(&mut s);
            }
            s
        })
    }

    /// Whether the speaker has applied a configuration (`/readyz`): its
    /// metrics then show what it decided.
    fn ready(&self) -> bool {
        self.get("/readyz").starts_with("HTTP/1.1 200")
    }

    /// The value of the unlabelled metric `name`, if shown.
    fn metric(&self, name: &str) -> Option<u64> {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
    }

    /// Whether the metrics list `service` as announced by BGP from here.
    fn announces(&self, service: &str) -> bool {
        self.metrics()
            .contains(&format!("protocol=\"bgp\",service=\"{service}\"}} 1"))
    }

    fn dump_log(&self) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        eprintln!("--- {} ---\n{}", self.log.display(), tail.join("\n"));
    }
}

struct Lab {
    frr: Frr,
    nodes: Vec<Node>,
    dir: PathBuf,
    _run: RunDir,
    _bridge: Bridge,
}

impl Lab {
    fn new() -> Self {
        testnet::require_root();
        let run = RunDir::new("speaker");
        let dir = config_dir(&run, "bgp");
        let bridge = Bridge::new("lan");
        let router = Netns::new("rtr");
        bridge.attach(&router, "eth0");
        router.add_addr("eth0", "10.0.0.1/24");
        // The router first, so the speakers' first connects succeed.
        let frr = Frr::start(&router, FRR_CONF);
        let nodes = [
            ("node1", "10.0.0.2"),
            ("node2", "10.0.0.3"),
            ("node3", "10.0.0.4"),
        ]
        .iter()
        .map(|(name, addr)| Node::start(&bridge, name, addr, &dir, &run))
        .collect();
        Self {
            frr,
            nodes,
            dir,
            _run: run,
            _bridge: bridge,
        }
    }

    /// FRR's paths for `prefix` (empty when it has none).
    fn paths(&self, prefix: &str) -> Vec<Value> {
        let v = self
            .frr
            .vtysh_json(&format!("show bgp ipv4 unicast {prefix} json"));
        v["paths"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until FRR's paths for `prefix` satisfy `pred`; returns them.
    fn wait_paths(
        &self,
        what: &str,
        timeout: Duration,
        prefix: &str,
        pred: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        wait_until(what, timeout, Duration::from_millis(100), || {
            let p = self.paths(prefix);
            pred(&p).then_some(p)
        })
        .unwrap_or_else(|e| {
            self.dump();
            panic!("{e}; paths: {:#?}", self.paths(prefix))
        })
    }

    fn write(&self, file: &str, text: &str) {
        // Write then rename, as a ConfigMap update does, so the speaker
        // never reads half a file.
        let tmp = self.dir.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.dir.join(file)).unwrap();
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap()
    }

    fn dump(&self) {
        for n in &self.nodes {
            n.dump_log();
        }
    }
}

/// A copy of `testdata/speaker/<fixture>` in `run`, for the test to edit.
fn config_dir(run: &RunDir, fixture: &str) -> PathBuf {
    let dir = run.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/speaker")
        .join(fixture);
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn next_hops(paths: &[Value]) -> Vec<String> {
    let mut hops: Vec<String> = paths
        .iter()
        .map(|p| {
            p["nexthops"][0]["ip"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    hops.sort();
    hops
}

fn communities(paths: &[Value]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            p["community"]["string"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn three_speakers_ecmp_reload_local_policy_and_shutdown() {
    let mut lab = Lab::new();
    for peer in ["10.0.0.2", "10.0.0.3", "10.0.0.4"] {
        lab.frr.wait_established(peer, T);
    }

    // A Cluster service: every node announces it, FRR has three paths and
    // installs them all (ECMP), each with the advertisement's community.
    let web = lab.wait_paths("three paths for web", T, "198.51.100.10/32", |p| {
        p.len() == 3
    });
    assert_eq!(
        next_hops(&web),
        ["10.0.0.2", "10.0.0.3", "10.0.0.4"],
        "{web:#?}"
    );
    assert!(
        communities(&web).iter().all(|c| c == "64512:100"),
        "{web:#?}"
    );
    let rib = lab.frr.vtysh_json("show ip route 198.51.100.10/32 json");
    let installed = rib["198.51.100.10/32"][0]["nexthops"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(installed, 3, "zebra should hold an ECMP route: {rib:#}");

    // externalTrafficPolicy Local with its only endpoint on node2: only
    // node2 announces it.
    let local = lab.wait_paths("one path for local", T, "198.51.100.20/32", |p| {
        !p.is_empty()
    });
    // Every node has decided on the services file (web, a Cluster service
    // of the same file, is announced from each): only node2 announces
    // local, at FRR too.
    for (i, n) in lab.nodes.iter().enumerate() {
        wait_until(
            "every node to announce web",
            T,
            Duration::from_millis(100),
            || n.announces("demo/web").then_some(()),
        )
        .unwrap_or_else(|e| {
            lab.dump();
            panic!("{e}")
        });
        assert_eq!(n.announces("demo/local"), i == 1, "node{} and local", i + 1);
    }
    let local_now = lab.paths("198.51.100.20/32");
    assert_eq!(next_hops(&local_now), ["10.0.0.3"], "{local:#?}");

    let metrics = lab.nodes[1].metrics();
    for line in [
        "metallb_bgp_session_up{peer=\"10.0.0.1:179\"} 1",
        "metallb_speaker_announced{ip=\"198.51.100.20\",node=\"node2\",protocol=\"bgp\",service=\"demo/local\"} 1",
        "ferrolb_config_last_reload_success 1",
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
    assert!(
        !lab.nodes[0].metrics().contains("service=\"demo/local\""),
        "node1 must not announce demo/local"
    );
    // MetalLB's FRR-mode counters, from the session's own: FRR's OPEN and
    // at least the KEEPALIVE that completed the handshake were received.
    for name in [
        "metallb_bgp_opens_received",
        "metallb_bgp_keepalives_received",
    ] {
        let prefix = format!("{name}{{peer=\"10.0.0.1:179\"}} ");
        let value: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"));
        assert!(value >= 1, "{name} {value}");
    }
    for name in [
        "metallb_bgp_opens_sent",
        "metallb_bgp_notifications_sent",
        "metallb_bgp_updates_total_received",
        "metallb_bgp_keepalives_sent",
        "metallb_bgp_route_refresh_sent",
        "metallb_bgp_total_sent",
        "metallb_bgp_total_received",
    ] {
        assert!(
            metrics.contains(&format!("{name}{{peer=\"10.0.0.1:179\"}} ")),
            "{name} missing:\n{metrics}"
        );
    }

    // A second community: every path gets it within a few seconds.
    let metallb = lab.read("metallb.yaml");
    lab.write(
        "metallb.yaml",
        &metallb.replace("communities: [web]", "communities: [web, \"64512:200\"]"),
    );
    lab.wait_paths(
        "the new community on all paths",
        CHANGE,
        "198.51.100.10/32",
        |p| p.len() == 3 && communities(p).iter().all(|c| c == "64512:100 64512:200"),
    );

    // A broken file (a reversed range) is rejected, counted, and the last
    // good configuration stays in force.
    lab.write("broken.yaml", "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: bad}\nspec: {addresses: [10.9.9.9-10.9.9.1]}\n");
    for n in &lab.nodes {
        wait_until(
            "every node to count the configuration error",
            CHANGE,
            Duration::from_millis(100),
            || {
                let m = n.metrics();
                m.contains("ferrolb_config_last_reload_success 0")
                    .then_some(())
            },
        )
        .unwrap();
    }
    assert!(
        !lab.nodes[0]
            .metrics()
            .contains("ferrolb_config_errors_total 0\n")
    );
    let log = std::fs::read_to_string(&lab.nodes[0].log).unwrap();
    assert!(
        log.contains("configuration rejected") && log.contains("spec.addresses[0]"),
        "the log should name the object and field"
    );
    // Every node has rejected it and still announces web.
    for n in &lab.nodes {
        assert!(n.announces("demo/web"), "{}", n.ns.name());
    }
    assert_eq!(lab.paths("198.51.100.10/32").len(), 3);

    // While the bad pool is there, the services are still current (issue
    // 14, finding 2): removing one withdraws it everywhere.
    let services = lab.read("services.yaml");
    let without_web = services
        .split("\n---\n")
        .filter(|doc| !doc.contains("name: web"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    lab.write("services.yaml", &without_web);
    lab.wait_paths(
        "web withdrawn",
        CHANGE,
        "198.51.100.10/32",
        <[Value]>::is_empty,
    );
    assert_eq!(next_hops(&lab.paths("198.51.100.20/32")), ["10.0.0.3"]);
    std::fs::remove_file(lab.dir.join("broken.yaml")).unwrap();
    wait_until(
        "node1 to load the configuration again",
        CHANGE,
        Duration::from_millis(100),
        || {
            let m = lab.nodes[0].metrics();
            m.contains("ferrolb_config_last_reload_success 1")
                .then_some(())
        },
    )
    .unwrap();

    // SIGTERM on node2: Cease / Administrative Shutdown, FRR drops its
    // routes at once rather than after the hold time.
    lab.nodes[1].proc.stop();
    lab.wait_paths(
        "local withdrawn after node2's shutdown",
        T,
        "198.51.100.20/32",
        <[Value]>::is_empty,
    );
    let neighbor = &lab.frr.vtysh_json("show bgp neighbors 10.0.0.3 json")["10.0.0.3"];
    assert_eq!(
        neighbor["lastNotificationReason"], "Cease/Administrative Shutdown",
        "{neighbor:#}"
    );
    assert_eq!(
        neighbor["lastShutdownDescription"], "ferrolb speaker shutting down",
        "{neighbor:#}"
    );
}

#[test]
fn layer2_elected_speaker_answers_arp() {
    testnet::require_root();
    testnet::require_binary("ping");
    let run = RunDir::new("speaker-l2");
    let dir = config_dir(&run, "l2");
    let bridge = Bridge::new("lan");
    let client = Netns::new("client");
    bridge.attach(&client, "eth0");
    client.add_addr("eth0", "10.0.0.10/24");
    let nodes: Vec<Node> = [("node1", "10.0.0.2"), ("node2", "10.0.0.3")]
        .iter()
        .map(|(name, addr)| Node::start(&bridge, name, addr, &dir, &run))
        .collect();

    // Both speakers run the same election; exactly one announces.
    let announced = |n: &Node| {
        n.metrics()
            .contains("protocol=\"layer2\",service=\"demo/web\"")
    };
    let winner = wait_until("an L2 winner", T, Duration::from_millis(100), || {
        nodes.iter().position(announced)
    })
    .unwrap_or_else(|e| {
        nodes.iter().for_each(Node::dump_log);
        panic!("{e}")
    });
    // The other node has applied the same configuration (the election
    // is computed from it): it does not announce.
    wait_until(
        "the other node to apply its configuration",
        T,
        Duration::from_millis(100),
        || nodes[1 - winner].ready().then_some(()),
    )
    .unwrap();
    assert!(!announced(&nodes[1 - winner]), "both nodes announce");

    // The client resolves the VIP to the winner's MAC (the echo itself gets
    // no answer: no node has the address configured).
    let mac: Value =
        serde_json::from_str(&nodes[winner].ns.ip(["-j", "link", "show", "eth0"])).unwrap();
    let mac = mac[0]["address"].as_str().unwrap().to_owned();
    let lladdr = wait_until(
        "the client to resolve 10.0.0.100",
        T,
        Duration::from_millis(200),
        || {
            let _ = client.exec(["ping", "-c", "1", "-W", "1", "10.0.0.100"]);
            let out = client.ip(["-j", "neigh", "show", "to", "10.0.0.100", "dev", "eth0"]);
            let v: Value = serde_json::from_str(&out).ok()?;
            v[0]["lladdr"].as_str().map(str::to_owned)
        },
    )
    .unwrap_or_else(|e| {
        nodes.iter().for_each(Node::dump_log);
        panic!("{e}")
    });
    assert_eq!(lladdr, mac, "the VIP must resolve to the elected node");
    // Counters are copied from the driver every second, per address
    // (MetalLB's `ip` label): the client's requests were answered, and the
    // takeover was announced.
    let counter = |m: &str, name: &str| -> u64 {
        let prefix = format!("{name}{{ip=\"10.0.0.100\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    wait_until(
        "the ARP requests, responses and announcements to be counted for 10.0.0.100",
        Duration::from_secs(5),
        Duration::from_millis(200),
        || {
            let m = nodes[winner].metrics();
            [
                "metallb_layer2_requests_received",
                "metallb_layer2_responses_sent",
                "metallb_layer2_gratuitous_sent",
            ]
            .iter()
            .all(|name| counter(&m, name) >= 1)
            .then_some(())
        },
    )
    .unwrap();
    // The node that does not announce counts nothing for it.
    let other = nodes[1 - winner].metrics();
    assert_eq!(
        counter(&other, "metallb_layer2_responses_sent"),
        0,
        "{other}"
    );
}

/// The memberlist key file is re-read while running: a three-step rotation
/// (accept the new key everywhere, make it primary node by node, drop the
/// old one) keeps both members together with no message rejected; a node
/// given a key nobody else has is then cut off, its messages counted as
/// authentication failures. The first key is a MetalLB-style Secret value
/// (a passphrase, hashed).
#[test]
fn memberlist_keys_rotate_without_restart() {
    testnet::require_root();
    let run = RunDir::new("speaker-keys");
    let dir = config_dir(&run, "l2");
    let bridge = Bridge::new("lan");
    let old = "q8v0Ytq3cVhK6j0lZk1oWm4pU2xN9rT5bL7dE3gF1hJ2kA4sD6fG8hJ0kL2zX4cV6bN8mQ0wE2rT4yU6iO8pA1sD3fG5hJ7kL9zX1cV3bN5mQ7wE9rT1yU3iO5pA7sD9fG1hJ3kL5zX7cV9bN1mQ3wE5rT7yU9iO1pA3sD5fG7hJ9kL1zX3cV5bN7mQ9wE1rT3yU5iO7pA9sD1fG3hJ5kL7zX9cV1bN3mQ5w==";
    let new = "3333333333333333333333333333333333333333333333333333333333333333";
    let stranger = "4444444444444444444444444444444444444444444444444444444444444444";
    let keys = |n: &str| run.join(&format!("{n}.keys"));
    let write = |n: &str, text: &str| {
        let tmp = run.join(&format!(".{n}.keys.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, keys(n)).unwrap();
    };
    write("node1", old);
    write("node2", old);
    let nodes: Vec<Node> = [("node1", "10.0.0.2"), ("node2", "10.0.0.3")]
        .iter()
        .map(|(name, addr)| {
            let bind = format!("{addr}:7946");
            let key_file = keys(name).display().to_string();
            let other = if *name == "node1" {
                "10.0.0.3:7946"
            } else {
                "10.0.0.2:7946"
            };
            Node::start_with(
                &bridge,
                name,
                addr,
                &dir,
                &run,
                &[
                    "--memberlist-bind",
                    &bind,
                    "--memberlist-join",
                    other,
                    "--memberlist-key-file",
                    &key_file,
                    "--memberlist-key-reload-ms",
                    "200",
                ],
            )
        })
        .collect();
    let together = |what: &str| {
        wait_until(what, T, Duration::from_millis(100), || {
            nodes
                .iter()
                .all(|n| n.metric("ferrolb_memberlist_members") == Some(2))
                .then_some(())
        })
        .unwrap_or_else(|e| {
            nodes.iter().for_each(Node::dump_log);
            panic!("{e}")
        });
    };
    together("the two members to form");
    let failures = |n: &Node| {
        ["authentication", "unknown_key", "mode_mismatch"]
            .iter()
            .map(|r| {
                n.metric(&format!(
                    "ferrolb_memberlist_rejected_total{{reason=\"{r}\"}}"
                ))
                .unwrap_or(0)
            })
            .sum::<u64>()
    };

    let reloads = |n: &Node| {
        std::fs::read_to_string(&n.log)
            .unwrap_or_default()
            .matches("memberlist keys reloaded")
            .count()
    };
    let received = |n: &Node| {
        n.metric("ferrolb_memberlist_packets_received_total")
            .unwrap_or(0)
    };
    let mut texts = [old.to_owned(), old.to_owned()];
    let mut want = [0, 0];

    // Step 1: both accept the new key; step 2: it becomes primary, one node
    // after the other; step 3: the old key goes. After each step, once both
    // speakers have loaded their file and exchanged messages under the new
    // keys, nothing was rejected.
    for (step, keys_now) in [
        [format!("{old}\n{new}\n"), format!("{old}\n{new}\n")],
        [format!("{new}\n{old}\n"), format!("{old}\n{new}\n")],
        [format!("{new}\n{old}\n"), format!("{new}\n{old}\n")],
        [format!("{new}\n"), format!("{new}\n")],
    ]
    .into_iter()
    .enumerate()
    {
        for (i, text) in keys_now.into_iter().enumerate() {
            // A file that does not change is not reloaded.
            if text != texts[i] {
                write(["node1", "node2"][i], &text);
                want[i] += 1;
                texts[i] = text;
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            wait_until(
                &format!("{} to reload its keys (step {step})", n.ns.name()),
                T,
                Duration::from_millis(100),
                || (reloads(n) >= want[i]).then_some(()),
            )
            .unwrap_or_else(|e| {
                nodes.iter().for_each(Node::dump_log);
                panic!("{e}")
            });
            assert_eq!(
                reloads(n),
                want[i],
                "{} reloads at step {step}",
                n.ns.name()
            );
        }
        // Probe traffic under the new keys: 20 datagrams received by each
        // after a metrics refresh that followed the reload (the metrics are
        // a snapshot, refreshed every second).
        for n in &nodes {
            let stale = received(n);
            let since = wait_until("a metrics refresh", T, Duration::from_millis(50), || {
                let now = received(n);
                (now != stale).then_some(now)
            })
            .unwrap();
            wait_until(
                &format!(
                    "{} to receive memberlist traffic (step {step})",
                    n.ns.name()
                ),
                T,
                Duration::from_millis(100),
                || (received(n) >= since + 20).then_some(()),
            )
            .unwrap_or_else(|e| {
                nodes.iter().for_each(Node::dump_log);
                panic!("{e}")
            });
        }
        together(&format!("the members to stay together after step {step}"));
        for n in &nodes {
            assert_eq!(
                failures(n),
                0,
                "{} rejected messages at step {step}",
                n.ns.name()
            );
        }
    }

    // A key only node2 has: node1's messages fail to open there.
    write("node2", stranger);
    wait_until(
        "node2 to reject node1's messages",
        T,
        Duration::from_millis(100),
        || (failures(&nodes[1]) > 0).then_some(()),
    )
    .unwrap_or_else(|e| {
        nodes.iter().for_each(Node::dump_log);
        panic!("{e}")
    });
}

/// Issue 14 finding 4: with a dual-stack listener (`--bgp-listen
/// [::]:179`), an IPv4 peer with a password comes up. The router is
/// reached on a port it does not listen on, so the session can only be
/// the one FRR opens to our listener: its TCP MD5 key must be set for
/// `::ffff:10.0.0.1` on the AF_INET6 socket (an AF_INET address there is
/// EINVAL, and the peer used to be dropped).
#[test]
fn dual_stack_listener_takes_an_ipv4_peer_with_a_password() {
    testnet::require_root();
    let run = RunDir::new("speaker-md5");
    let dir = config_dir(&run, "bgp");
    let metallb = std::fs::read_to_string(dir.join("metallb.yaml"))
        .unwrap()
        .replace(
            "  connectTime: 1s\n",
            "  connectTime: 1s\n  peerPort: 1179\n  passwordSecret: {name: bgp-auth}\n",
        );
    assert!(metallb.contains("passwordSecret"));
    std::fs::write(
        dir.join("metallb.yaml"),
        format!(
            "{metallb}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: bgp-auth, namespace: metallb-system}}\ntype: kubernetes.io/basic-auth\nstringData: {{password: s3cret-key}}\n"
        ),
    )
    .unwrap();
    let bridge = Bridge::new("md5lan");
    let router = Netns::new("md5rtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let frr = Frr::start(
        &router,
        "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.0.2 remote-as 64512
 neighbor 10.0.0.2 password s3cret-key
 neighbor 10.0.0.2 timers connect 1
",
    );
    let node = Node::start_with(
        &bridge,
        "node1",
        "10.0.0.2",
        &dir,
        &run,
        &["--bgp-listen", "[::]:179"],
    );
    let established = wait_until(
        "FRR's session to the dual-stack listener",
        T,
        Duration::from_millis(200),
        || (frr.bgp_state("10.0.0.2").as_deref() == Some("Established")).then_some(()),
    );
    if let Err(e) = established {
        node.dump_log();
        panic!("{e}");
    }
    // Our side of the session is the listener's port: FRR connected to us.
    let n = frr.vtysh_json("show bgp neighbors 10.0.0.2 json");
    assert_eq!(n["10.0.0.2"]["portForeign"], 179, "{n:#}");
    let routes = wait_until(
        "the service route at FRR",
        T,
        Duration::from_millis(200),
        || {
            let v = frr.vtysh_json("show bgp ipv4 unicast 198.51.100.10/32 json");
            v["paths"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
                .then_some(())
        },
    );
    if let Err(e) = routes {
        node.dump_log();
        panic!("{e}");
    }
    assert_eq!(node.metric("ferrolb_bgp_peer_config_errors_total"), Some(0));
    let log = std::fs::read_to_string(&node.log).unwrap();
    assert!(!log.contains("s3cret-key"), "the key is in the log");
}

/// Issue 14 finding 12: what each capability of the DaemonSet is for,
/// shown with the real speaker run as root with only some capabilities
/// (`setpriv` empties the bounding set but for them).
///
/// - none at all: BGP with a TCP MD5 password (TCP_MD5SIG needs no
///   capability), the netlink interface watch and the file source work;
///   layer 2 cannot open its AF_PACKET sockets.
/// - NET_RAW alone: everything the shipped DaemonSet runs, ARP answers
///   included. NET_ADMIN is never needed.
/// - `--bgp-listen` on port 179 (not in the shipped arguments) needs
///   NET_BIND_SERVICE as well.
#[test]
fn capabilities_the_speaker_needs() {
    testnet::require_root();
    let run = RunDir::new("speaker-caps");
    let dir = config_dir(&run, "bgp");
    let metallb = std::fs::read_to_string(dir.join("metallb.yaml"))
        .unwrap()
        .replace(
            "  connectTime: 1s\n",
            "  connectTime: 1s\n  passwordSecret: {name: bgp-auth}\n",
        );
    std::fs::write(
        dir.join("metallb.yaml"),
        format!(
            "{metallb}---
apiVersion: v1
kind: Secret
metadata: {{name: bgp-auth, namespace: metallb-system}}
type: kubernetes.io/basic-auth
stringData: {{password: s3cret-key}}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {{name: l2-pool, namespace: metallb-system}}
spec: {{addresses: [10.0.0.100/32]}}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {{name: l2-adv, namespace: metallb-system}}
spec: {{ipAddressPools: [l2-pool]}}
---
apiVersion: v1
kind: Service
metadata: {{name: l2web, namespace: demo}}
spec: {{type: LoadBalancer}}
status: {{loadBalancer: {{ingress: [{{ip: 10.0.0.100}}]}}}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: l2web-1
  namespace: demo
  labels: {{kubernetes.io/service-name: l2web}}
addressType: IPv4
endpoints:
  - addresses: [10.244.1.9]
    nodeName: node1
    conditions: {{ready: true}}
"
        ),
    )
    .unwrap();
    // One node: it wins every election.
    std::fs::write(
        dir.join("nodes.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus:\n  addresses: [{type: InternalIP, address: 10.0.0.2}]\n",
    )
    .unwrap();
    let bridge = Bridge::new("caplan");
    let router = Netns::new("caprtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    let frr = Frr::start(
        &router,
        "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.0.2 remote-as 64512
 neighbor 10.0.0.2 password s3cret-key
 neighbor 10.0.0.2 timers connect 1
",
    );
    let has_route = || {
        let v = frr.vtysh_json("show bgp ipv4 unicast 198.51.100.10/32 json");
        v["paths"].as_array().is_some_and(|p| !p.is_empty())
    };
    let arp_answered = || {
        router
            .exec(["arping", "-c", "1", "-w", "1", "-I", "eth0", "10.0.0.100"])
            .status
            .success()
    };
    let log_of = |n: &Node| std::fs::read_to_string(&n.log).unwrap_or_default();
    let fail = |n: &Node, e: String| -> ! {
        n.dump_log();
        panic!("{e}")
    };

    // Only NET_RAW: BGP with its password, and ARP.
    let mut node = Node::start_caps(
        &bridge,
        "node1",
        "10.0.0.2",
        &dir,
        &run,
        &[],
        Some(&["net_raw"]),
    );
    if let Err(e) = wait_until(
        "BGP and its route with NET_RAW only",
        T,
        Duration::from_millis(200),
        || has_route().then_some(()),
    ) {
        fail(&node, e.to_string());
    }
    if let Err(e) = wait_until(
        "an ARP answer with NET_RAW only",
        T,
        Duration::from_millis(100),
        || arp_answered().then_some(()),
    ) {
        fail(&node, e.to_string());
    }
    node.proc.stop();
    let log = log_of(&node);
    assert!(!log.contains("Operation not permitted"), "{log}");
    drop(node);
    wait_until(
        "FRR to drop the route",
        T,
        Duration::from_millis(100),
        || (!has_route()).then_some(()),
    )
    .unwrap();

    // No capability at all: BGP with MD5 still comes up; layer 2 reports
    // that it may not open its packet sockets.
    let mut node = Node::start_caps(&bridge, "node1", "10.0.0.2", &dir, &run, &[], Some(&[]));
    if let Err(e) = wait_until(
        "BGP and its route without capabilities",
        T,
        Duration::from_millis(200),
        || has_route().then_some(()),
    ) {
        fail(&node, e.to_string());
    }
    if let Err(e) = wait_until(
        "layer 2 to report EPERM",
        T,
        Duration::from_millis(100),
        || {
            let log = log_of(&node);
            log.lines()
                .any(|l| l.contains("layer 2") && l.contains("Operation not permitted"))
                .then_some(())
        },
    ) {
        fail(&node, e.to_string());
    }
    assert!(!arp_answered(), "ARP answered without NET_RAW");
    node.proc.stop();
    drop(node);
    wait_until(
        "FRR to drop the route",
        T,
        Duration::from_millis(100),
        || (!has_route()).then_some(()),
    )
    .unwrap();

    // --bgp-listen on 179 needs NET_BIND_SERVICE.
    let mut node = Node::start_caps(
        &bridge,
        "node1",
        "10.0.0.2",
        &dir,
        &run,
        &["--bgp-listen", "0.0.0.0:179"],
        Some(&["net_raw"]),
    );
    let status = wait_until(
        "the speaker to refuse to start",
        T,
        Duration::from_millis(100),
        || node.proc.try_status(),
    );
    let status = match status {
        Ok(s) => s,
        Err(e) => fail(&node, e.to_string()),
    };
    assert!(!status.success());
    let log = log_of(&node);
    assert!(log.contains("--bgp-listen: Permission denied"), "{log}");
    drop(node);
    let mut node = Node::start_caps(
        &bridge,
        "node1",
        "10.0.0.2",
        &dir,
        &run,
        &["--bgp-listen", "0.0.0.0:179"],
        Some(&["net_raw", "net_bind_service"]),
    );
    if let Err(e) = wait_until(
        "BGP with --bgp-listen and NET_BIND_SERVICE",
        T,
        Duration::from_millis(200),
        || has_route().then_some(()),
    ) {
        fail(&node, e.to_string());
    }
    assert!(log_of(&node).contains("bgp listening"));
    node.proc.stop();
}

/// The peers' part of the local-AS lab: FRR expects `frr_local` from us,
/// BIRD 4200000001 (a 4-octet AS: AS_TRANS in the OPEN's My AS).
fn local_asn_config(frr_local: u32) -> String {
    format!(
        "apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {{name: bgp-pool, namespace: metallb-system}}
spec:
  addresses: [198.51.100.0/24]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {{name: frr, namespace: metallb-system}}
spec:
  myASN: 64512
  peerASN: 64500
  localASN: {frr_local}
  peerAddress: 10.0.0.1
  holdTime: 9s
  connectTime: 1s
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {{name: bird, namespace: metallb-system}}
spec:
  myASN: 64512
  peerASN: 64501
  localASN: 4200000001
  peerAddress: 10.0.0.3
  holdTime: 9s
  connectTime: 1s
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {{name: bgp-adv, namespace: metallb-system}}
spec:
  ipAddressPools: [bgp-pool]
"
    )
}

const LOCAL_AS_FRR: &str = "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 bgp log-neighbor-changes
 neighbor 10.0.0.2 remote-as 65410
 neighbor 10.0.0.2 timers connect 1
";

/// BIRD imports into its table and exports to the namespace's FIB.
const LOCAL_AS_BIRD: &str = "
router id 10.0.0.3;
protocol device {}
protocol kernel {
  ipv4 { import none; export all; };
}
protocol bgp speaker {
  local 10.0.0.3 as 64501;
  neighbor 10.0.0.2 as 4200000001;
  hold time 9;
  connect delay time 1;
  connect retry time 1;
  ipv4 { import all; export none; };
}
";

/// The route to `prefix` in `ns`'s FIB, as `ip route` prints it.
fn fib(ns: &Netns, prefix: &str) -> String {
    ns.run(["ip", "route", "show", prefix])
}

/// BGPPeer `localASN` (issue 20 §2), as MetalLB's FRR mode configures it
/// (`neighbor X local-as N no-prepend replace-as`): FRR configured with
/// `remote-as 65410` and BIRD with `neighbor ... as 4200000001` peer with
/// a speaker whose myASN is 64512, see the local AS as ours, receive the
/// service route with an AS_PATH of the local AS alone, and install it.
/// Changing localASN restarts the session with the new AS in the OPEN:
/// FRR, still expecting 65410, refuses it (Bad Peer AS) and withdraws the
/// route; once FRR expects 65411 the route is back with AS_PATH 65411.
#[test]
fn local_asn_is_the_as_frr_and_bird_see() {
    testnet::require_root();
    let run = RunDir::new("speaker-localas");
    let dir = config_dir(&run, "bgp");
    std::fs::write(dir.join("metallb.yaml"), local_asn_config(65410)).unwrap();
    let bridge = Bridge::new("lasn");
    let frr_ns = Netns::new("lasfrr");
    bridge.attach(&frr_ns, "eth0");
    frr_ns.add_addr("eth0", "10.0.0.1/24");
    let bird_ns = Netns::new("lasbird");
    bridge.attach(&bird_ns, "eth0");
    bird_ns.add_addr("eth0", "10.0.0.3/24");
    let frr = Frr::start(&frr_ns, LOCAL_AS_FRR);
    let bird = Bird::start(&bird_ns, LOCAL_AS_BIRD);
    let node = Node::start(&bridge, "node1", "10.0.0.2", &dir, &run);
    let prefix = "198.51.100.10/32";
    let fail = |e: String| -> ! {
        node.dump_log();
        panic!("{e}")
    };

    // FRR: the session is up with AS 65410, the path is 65410 alone, and
    // zebra installed the route.
    let aspath = |frr: &Frr| {
        let v = frr.vtysh_json(&format!("show bgp ipv4 unicast {prefix} json"));
        v["paths"][0]["aspath"]["segments"].clone()
    };
    let segs = wait_until("the route at FRR", T, Duration::from_millis(200), || {
        let s = aspath(&frr);
        s.is_array().then_some(s)
    })
    .unwrap_or_else(|e| fail(e.to_string()));
    assert_eq!(
        segs,
        serde_json::json!([{"type": "as-sequence", "list": [65410]}]),
        "FRR's AS_PATH"
    );
    let n = frr.vtysh_json("show bgp neighbors 10.0.0.2 json");
    assert_eq!(n["10.0.0.2"]["remoteAs"], 65410, "{n:#}");
    assert_eq!(n["10.0.0.2"]["localAs"], 64500, "{n:#}");
    assert_eq!(n["10.0.0.2"]["nbrExternalLink"], true, "{n:#}");
    wait_until("FRR's FIB route", T, Duration::from_millis(200), || {
        let r = fib(&frr_ns, prefix);
        (r.contains("via 10.0.0.2") && r.contains("proto bgp")).then_some(())
    })
    .unwrap_or_else(|e| fail(e.to_string()));

    // BIRD: the neighbor AS is the 4-octet local AS, and so is the path.
    let route = wait_until("the route at BIRD", T, Duration::from_millis(200), || {
        let r = bird.birdc(&format!("show route all {prefix}"));
        r.contains("BGP.as_path").then_some(r)
    })
    .unwrap_or_else(|e| fail(e.to_string()));
    let path: Vec<&str> = route
        .lines()
        .filter_map(|l| l.trim().strip_prefix("BGP.as_path:"))
        .map(str::trim)
        .collect();
    assert_eq!(path, ["4200000001"], "{route}");
    let proto = bird.birdc("show protocols all speaker");
    assert!(proto.contains("Established"), "{proto}");
    let neighbor_as: Vec<&str> = proto
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Neighbor AS:"))
        .map(str::trim)
        .collect();
    assert_eq!(neighbor_as, ["4200000001"], "{proto}");
    wait_until("BIRD's FIB route", T, Duration::from_millis(200), || {
        let r = fib(&bird_ns, prefix);
        (r.contains("via 10.0.0.2") && r.contains("proto bird")).then_some(())
    })
    .unwrap_or_else(|e| fail(e.to_string()));
    assert_eq!(node.metric("ferrolb_bgp_peer_config_errors_total"), Some(0));

    // A new localASN: a new session, whose OPEN FRR (still expecting
    // 65410) refuses; the route goes.
    let prefix_json = format!("show bgp ipv4 unicast {prefix} json");
    std::fs::write(dir.join(".metallb.yaml.tmp"), local_asn_config(65411)).unwrap();
    std::fs::rename(dir.join(".metallb.yaml.tmp"), dir.join("metallb.yaml")).unwrap();
    wait_until(
        "FRR to refuse the OPEN with AS 65411",
        CHANGE,
        Duration::from_millis(200),
        || {
            // Our log names the NOTIFICATION FRR answered the OPEN with.
            let log = std::fs::read_to_string(&node.log).unwrap_or_default();
            let refused = log.lines().any(|l| {
                l.contains("name=\"frr\"")
                    && l.contains("notification received")
                    && l.contains("Bad Peer AS")
            });
            let gone = frr.vtysh_json(&prefix_json)["paths"].is_null();
            (refused && gone).then_some(())
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("{:#}", frr.vtysh_json("show bgp neighbors 10.0.0.2 json"));
        fail(e.to_string())
    });
    frr.configure(&["router bgp 64500", "neighbor 10.0.0.2 remote-as 65411"]);
    let segs = wait_until(
        "the route back at FRR",
        T,
        Duration::from_millis(200),
        || {
            let s = aspath(&frr);
            (s == serde_json::json!([{"type": "as-sequence", "list": [65411]}])).then_some(s)
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("{:#}", frr.vtysh_json(&prefix_json));
        fail(e.to_string())
    });
    assert!(segs.is_array());
    let n = frr.vtysh_json("show bgp neighbors 10.0.0.2 json");
    assert_eq!(n["10.0.0.2"]["remoteAs"], 65411, "{n:#}");
    // BIRD's peer did not change: its session is up.
    assert!(bird.is_established("speaker"));
}

/// A speaker in AS 4200000001 towards BIRD as a 2-octet speaker.
const AS4_METALLB: &str = "apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: bgp-pool, namespace: metallb-system}
spec:
  addresses: [198.51.100.0/24]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: bird, namespace: metallb-system}
spec:
  myASN: 4200000001
  peerASN: 64501
  peerAddress: 10.0.0.3
  holdTime: 9s
  connectTime: 1s
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: bgp-adv, namespace: metallb-system}
spec:
  ipAddressPools: [bgp-pool]
";

/// BIRD without the 4-octet AS capability (`enable as4 off`): an OLD
/// speaker on the wire, which still reads AS4_PATH (BIRD's documentation:
/// "even when disabled, BIRD behaves internally as AS4-aware BGP router").
/// It refuses a neighbor AS above 65535 ("Neighbor AS number out of range
/// (AS4 not available)") yet compares AS_TRANS with the AS of our 4-octet
/// AS capability (Bad Peer AS), so it takes any external AS.
const AS4_OFF_BIRD: &str = "
router id 10.0.0.3;
protocol device {}
protocol bgp speaker {
  local 10.0.0.3 as 64501;
  neighbor 10.0.0.2 external;
  enable as4 off;
  hold time 9;
  connect delay time 1;
  connect retry time 1;
  ipv4 { import all; export none; };
}
";

/// RFC 6793 §4.2.2 against a real OLD speaker: BIRD with `enable as4 off`
/// peers with a speaker in AS 4200000001 over a session without 4-octet
/// AS numbers (BIRD's `Session:` line lacks `AS4`), so the AS_PATH on the
/// wire is AS_TRANS 23456. BIRD's route shows AS_PATH 4200000001: BIRD
/// puts the path back together from AS4_PATH (RFC 6793 §4.2.3), which
/// only the AS4_PATH we send can give it (without it BIRD shows 23456,
/// as it did before AS4_PATH was sent). Our log says why the peer sees
/// AS_TRANS.
#[test]
fn two_octet_bird_reads_the_real_as_from_as4_path() {
    testnet::require_root();
    let run = RunDir::new("speaker-as4path");
    let dir = config_dir(&run, "bgp");
    std::fs::write(dir.join("metallb.yaml"), AS4_METALLB).unwrap();
    let bridge = Bridge::new("as4p");
    let bird_ns = Netns::new("as4bird");
    bridge.attach(&bird_ns, "eth0");
    bird_ns.add_addr("eth0", "10.0.0.3/24");
    let bird = Bird::start(&bird_ns, AS4_OFF_BIRD);
    let node = Node::start(&bridge, "node1", "10.0.0.2", &dir, &run);
    let prefix = "198.51.100.10/32";
    let fail = |e: String| -> ! {
        node.dump_log();
        panic!("{e}")
    };

    let route = wait_until("the route at BIRD", T, Duration::from_millis(200), || {
        let r = bird.birdc(&format!("show route all {prefix}"));
        r.contains("BGP.as_path").then_some(r)
    })
    .unwrap_or_else(|e| fail(e.to_string()));
    let field = |text: &str, name: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix(name))
            .map(|v| v.trim().to_owned())
            .collect()
    };
    let proto = bird.birdc("show protocols all speaker");
    assert!(proto.contains("Established"), "{proto}");
    // BIRD names a 4-octet session "external AS4".
    assert_eq!(field(&proto, "Session:"), ["external"], "{proto}");
    assert_eq!(field(&proto, "Neighbor AS:"), ["4200000001"], "{proto}");
    assert_eq!(field(&route, "BGP.as_path:"), ["4200000001"], "{route}");

    let log = std::fs::read_to_string(&node.log).unwrap_or_default();
    let said = log.lines().any(|l| {
        l.contains("session established")
            && l.contains("four_octet_as=false")
            && l.contains("name=\"bird\"")
    }) && log.contains("peer without 4-octet AS numbers");
    if !said {
        fail("the speaker's log does not say the session is 2-octet".to_owned());
    }
}

/// Three sessions from one node to FRR, one per field under test, each
/// from its own `sourceAddress` (FRR tells its neighbors apart by address).
const FIELDS_METALLB: &str = "apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: bgp-pool, namespace: metallb-system}
spec:
  addresses: [198.51.100.0/24]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: multihop, namespace: metallb-system}
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 10.0.1.1
  sourceAddress: 10.0.0.22
  ebgpMultiHop: true
  connectTime: 1s
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: dynamic, namespace: metallb-system}
spec:
  myASN: 64512
  dynamicASN: external
  peerAddress: 10.0.0.1
  sourceAddress: 10.0.0.23
  routerID: 10.255.0.23
  connectTime: 1s
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: mp-off, namespace: metallb-system}
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 10.0.0.11
  sourceAddress: 10.0.0.24
  disableMP: true
  holdTime: 6s
  connectTime: 1s
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: bgp-adv, namespace: metallb-system}
spec:
  ipAddressPools: [bgp-pool]
";

const FIELDS_FRR: &str = "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 bgp log-neighbor-changes
 neighbor 10.0.0.22 remote-as 64512
 neighbor 10.0.0.22 ebgp-multihop
 neighbor 10.0.0.22 update-source 10.0.1.1
 neighbor 10.0.0.22 timers connect 1
 neighbor 10.0.0.23 remote-as 64512
 neighbor 10.0.0.23 timers connect 1
 neighbor 10.0.0.24 remote-as 64512
 neighbor 10.0.0.24 timers connect 1
";

/// BGPPeer fields as a real router sees them (issue 20 §2):
///
/// - `ebgpMultiHop`: FRR's address 10.0.1.1 is behind a forwarding
///   namespace, so our packets cross a router; with the TTL of 1 a
///   directly connected eBGP session uses, the hop would drop them.
/// - `dynamicASN: external`: FRR in AS 64500 is accepted as external.
/// - `routerID`: FRR sees 10.255.0.23 as our identifier.
/// - `sourceAddress`: each session comes from its own address, which FRR
///   matches against its neighbor statements.
/// - `disableMP` over IPv4: our OPEN has no multiprotocol capability, FRR
///   takes IPv4 unicast as implied (RFC 4760 §8) and has the route.
/// - `holdTime: 6s`: FRR negotiates 6 s (its own is 180 s).
///
/// Each session carries the service route.
#[test]
fn peer_fields_as_frr_sees_them() {
    testnet::require_root();
    let run = RunDir::new("speaker-fields");
    let dir = config_dir(&run, "bgp");
    std::fs::write(dir.join("metallb.yaml"), FIELDS_METALLB).unwrap();
    let bridge = Bridge::new("flds");
    let frr_ns = Netns::new("fldfrr");
    bridge.attach(&frr_ns, "eth0");
    frr_ns.add_addr("eth0", "10.0.0.1/24");
    frr_ns.add_addr("eth0", "10.0.0.11/24");
    // The far side: FRR's 10.0.1.1 is reached through `hop`.
    let hop = Netns::new("fldhop");
    bridge.attach(&hop, "eth0");
    hop.add_addr("eth0", "10.0.0.254/24");
    veth_pair(&hop, "eth1", &frr_ns, "eth1");
    hop.add_addr("eth1", "10.0.1.254/24");
    frr_ns.add_addr("eth1", "10.0.1.1/24");
    hop.sysctl("net.ipv4.ip_forward", "1");
    let frr = Frr::start(&frr_ns, FIELDS_FRR);
    let node = Node::start(&bridge, "node1", "10.0.0.2", &dir, &run);
    for a in ["10.0.0.22/24", "10.0.0.23/24", "10.0.0.24/24"] {
        node.ns.add_addr("eth0", a);
    }
    node.ns.add_route("10.0.1.0/24", "10.0.0.254");
    let fail = |e: String| -> ! {
        node.dump_log();
        panic!("{e}")
    };

    // Every session Established, each with the route.
    let summary = wait_until(
        "the three sessions up, each with the route",
        T,
        Duration::from_millis(200),
        || {
            let v = frr.vtysh_json("show bgp ipv4 unicast summary json");
            ["10.0.0.22", "10.0.0.23", "10.0.0.24"]
                .iter()
                .all(|p| v["peers"][p]["pfxRcd"] == 1)
                .then_some(v)
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("{:#}", frr.vtysh_json("show bgp ipv4 unicast summary json"));
        fail(e.to_string())
    });
    for p in ["10.0.0.22", "10.0.0.23", "10.0.0.24"] {
        assert_eq!(summary["peers"][p]["state"], "Established", "{summary:#}");
    }
    let neighbor = |ip: &str| frr.vtysh_json(&format!("show bgp neighbors {ip} json"))[ip].clone();

    // ebgpMultiHop: the session crossed `hop`, which forwarded it.
    let n = neighbor("10.0.0.22");
    assert_eq!(n["hostLocal"], "10.0.1.1", "{n:#}");
    let forwarded = hop.run(["cat", "/proc/net/snmp"]);
    let ip_stats: Vec<&str> = forwarded.lines().filter(|l| l.starts_with("Ip:")).collect();
    let fwd_col = ip_stats[0]
        .split_whitespace()
        .position(|c| c == "ForwDatagrams")
        .unwrap();
    let forw: u64 = ip_stats[1]
        .split_whitespace()
        .nth(fwd_col)
        .unwrap()
        .parse()
        .unwrap();
    assert!(forw > 0, "hop forwarded nothing: {forwarded}");

    // dynamicASN external and routerID.
    let n = neighbor("10.0.0.23");
    assert_eq!(n["remoteAs"], 64512, "{n:#}");
    assert_eq!(n["remoteRouterId"], "10.255.0.23", "{n:#}");
    assert_eq!(n["nbrExternalLink"], true, "{n:#}");

    // disableMP over IPv4 and holdTime.
    let n = neighbor("10.0.0.24");
    let mp = &n["neighborCapabilities"]["multiprotocolExtensions"]["ipv4Unicast"];
    assert_eq!(mp["advertised"], true, "{n:#}");
    assert!(
        mp.get("received").is_none() && mp.get("advertisedAndReceived").is_none(),
        "FRR received a multiprotocol capability: {n:#}"
    );
    assert_eq!(n["bgpTimerHoldTimeMsecs"], 6000, "{n:#}");
    assert_eq!(node.metric("ferrolb_bgp_peer_config_errors_total"), Some(0));
}

/// FRR configured as MetalLB's FRR mode configures it for `localASN:
/// 65410` (`neighbor X local-as 65410 no-prepend replace-as`), beside our
/// speaker with the same BGPPeer: the router, configured with `remote-as
/// 65410` for both, receives the same AS_PATH from each. What a MetalLB
/// user sees at the router is what a ferrolb user sees.
#[test]
fn local_asn_as_metallb_frr_mode_configures_it() {
    testnet::require_root();
    let run = RunDir::new("speaker-localas-mlb");
    let dir = config_dir(&run, "bgp");
    let metallb = local_asn_config(65410);
    // Only the FRR peer: the BIRD one is left out.
    let frr_only = metallb
        .split("---\n")
        .filter(|doc| !doc.contains("name: bird"))
        .collect::<Vec<_>>()
        .join("---\n");
    assert!(frr_only.contains("localASN: 65410") && !frr_only.contains("10.0.0.3"));
    std::fs::write(dir.join("metallb.yaml"), frr_only).unwrap();
    let bridge = Bridge::new("lasm");
    let router_ns = Netns::new("lasmrtr");
    bridge.attach(&router_ns, "eth0");
    router_ns.add_addr("eth0", "10.0.0.1/24");
    let metallb_ns = Netns::new("lasmmlb");
    bridge.attach(&metallb_ns, "eth0");
    metallb_ns.add_addr("eth0", "10.0.0.4/24");
    let router = Frr::start(
        &router_ns,
        &format!(
            "{LOCAL_AS_FRR} neighbor 10.0.0.4 remote-as 65410\n neighbor 10.0.0.4 timers connect 1\n"
        ),
    );
    // The lines MetalLB's neighborsession.tmpl writes for this BGPPeer.
    let _metallb = Frr::start(
        &metallb_ns,
        "
router bgp 64512
 bgp router-id 10.0.0.4
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.0.1 remote-as 64500
 neighbor 10.0.0.1 local-as 65410 no-prepend replace-as
 neighbor 10.0.0.1 timers connect 1
 address-family ipv4 unicast
  network 198.51.100.10/32
 exit-address-family
",
    );
    let node = Node::start(&bridge, "node1", "10.0.0.2", &dir, &run);
    let prefix = "show bgp ipv4 unicast 198.51.100.10/32 json";
    let paths = wait_until(
        "both paths at the router",
        T,
        Duration::from_millis(200),
        || {
            let v = router.vtysh_json(prefix);
            let p = v["paths"].as_array().cloned().unwrap_or_default();
            (p.len() == 2).then_some(p)
        },
    )
    .unwrap_or_else(|e| {
        node.dump_log();
        panic!("{e}: {:#}", router.vtysh_json(prefix))
    });
    let by = |from: &str| {
        paths
            .iter()
            .find(|p| p["peer"]["peerId"] == from)
            .unwrap_or_else(|| panic!("no path from {from}: {paths:#?}"))
    };
    let (ours, theirs) = (by("10.0.0.2"), by("10.0.0.4"));
    assert_eq!(ours["aspath"], theirs["aspath"], "{paths:#?}");
    assert_eq!(
        ours["aspath"]["segments"],
        serde_json::json!([{"type": "as-sequence", "list": [65410]}])
    );
    for ip in ["10.0.0.2", "10.0.0.4"] {
        let n = router.vtysh_json(&format!("show bgp neighbors {ip} json"));
        assert_eq!(n[ip]["remoteAs"], 65410, "{n:#}");
        assert_eq!(n[ip]["nbrExternalLink"], true, "{n:#}");
    }
}

/// The times (ms since the UNIX epoch) of our "connect failed" log lines
/// for BGPPeer `name`, in order.
fn connect_failures(log: &str, name: &str) -> Vec<f64> {
    let span = format!("name=\"{name}\"");
    log.lines()
        .filter(|l| l.contains(&span) && l.contains("connect failed"))
        .filter_map(|l| {
            let ts: k8s_openapi::jiff::Timestamp = l.split_whitespace().next()?.parse().ok()?;
            Some(ts.as_microsecond() as f64 / 1000.0)
        })
        .collect()
}

/// `connectTime` against a router address where nothing listens (each
/// SYN gets a RST at once, so each attempt fails as it is made): the
/// peer with `connectTime: 3s` retries no sooner than 2.25 s (RFC 4271
/// §10 jitter, 0.75 of it), and the one with `connectTime: 1s`, in the
/// same run, makes several attempts in the time the other makes two. A
/// third peer's address has no host (no SYN is ever answered): its
/// attempts are abandoned and renewed every `connectTime` too.
#[test]
fn connect_time_spaces_the_connection_attempts() {
    testnet::require_root();
    let run = RunDir::new("speaker-connect");
    let dir = config_dir(&run, "bgp");
    let peer = |name: &str, addr: &str, secs: u32| {
        format!(
            "---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {{name: {name}, namespace: metallb-system}}\nspec: {{myASN: 64512, peerASN: 64500, peerAddress: {addr}, connectTime: {secs}s}}\n"
        )
    };
    let metallb = format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: bgp-pool, namespace: metallb-system}}\nspec: {{addresses: [198.51.100.0/24]}}\n{}{}",
        peer("fast", "10.0.0.1", 1),
        peer("slow", "10.0.0.11", 3)
    ) + &peer("silent", "10.0.0.99", 1);
    std::fs::write(dir.join("metallb.yaml"), metallb).unwrap();
    let bridge = Bridge::new("conn");
    let router = Netns::new("connrtr");
    bridge.attach(&router, "eth0");
    router.add_addr("eth0", "10.0.0.1/24");
    router.add_addr("eth0", "10.0.0.11/24");
    let node = Node::start(&bridge, "node1", "10.0.0.2", &dir, &run);
    let log = || std::fs::read_to_string(&node.log).unwrap_or_default();
    let slow = wait_until(
        "three failed attempts of the slow peer",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            let t = connect_failures(&log(), "slow");
            (t.len() >= 3).then_some(t)
        },
    )
    .unwrap_or_else(|e| {
        node.dump_log();
        panic!("{e}")
    });
    let fast = connect_failures(&log(), "fast");
    for w in slow.windows(2) {
        assert!(w[1] - w[0] >= 2250.0, "slow: {slow:?}");
    }
    for w in fast.windows(2) {
        assert!(w[1] - w[0] >= 750.0, "fast: {fast:?}");
    }
    let within = |times: &[f64]| {
        times
            .iter()
            .filter(|&&t| t > slow[0] && t <= slow[2])
            .count()
    };
    assert!(
        within(&fast) >= 3,
        "{} attempts of the fast peer while the slow one made two: fast {fast:?}, slow {slow:?}",
        within(&fast)
    );
    // No host answers for 10.0.0.99: each attempt is still pending when
    // ConnectRetry expires, and is abandoned for a new one.
    let abandoned: Vec<f64> = log()
        .lines()
        .filter(|l| l.contains("name=\"silent\"") && l.contains("attempt abandoned"))
        .filter_map(|l| {
            let ts: k8s_openapi::jiff::Timestamp = l.split_whitespace().next()?.parse().ok()?;
            Some(ts.as_microsecond() as f64 / 1000.0)
        })
        .collect();
    for w in abandoned.windows(2) {
        assert!(w[1] - w[0] >= 750.0, "silent: {abandoned:?}");
    }
    assert!(
        within(&abandoned) >= 3,
        "{} attempts of the silent peer abandoned while the slow one made two: {abandoned:?}, slow {slow:?}",
        within(&abandoned)
    );
}

/// `vrf`: the session's socket is bound to the named device
/// (`SO_BINDTODEVICE`), which is how a socket enters a VRF. The kernels
/// here have no VRF driver (`ip link add ... type vrf`: "Unknown device
/// type"), so the device is a plain interface: the session to FRR over it
/// comes up, FRR has the route, and `ss` shows our end of it bound to the
/// device (`10.0.3.2%eth1`).
#[test]
fn vrf_binds_the_session_to_its_device() {
    testnet::require_root();
    let run = RunDir::new("speaker-vrf");
    let dir = config_dir(&run, "bgp");
    let metallb = std::fs::read_to_string(dir.join("metallb.yaml"))
        .unwrap()
        .replace(
            "  peerAddress: 10.0.0.1\n",
            "  peerAddress: 10.0.3.1\n  vrf: eth1\n",
        );
    assert!(metallb.contains("vrf: eth1"));
    std::fs::write(dir.join("metallb.yaml"), metallb).unwrap();
    let bridge = Bridge::new("vrfl");
    let frr_ns = Netns::new("vrffrr");
    let frr = Frr::start(
        &frr_ns,
        "
router bgp 64500
 bgp router-id 10.0.3.1
 no bgp ebgp-requires-policy
 neighbor 10.0.3.2 remote-as 64512
 neighbor 10.0.3.2 timers connect 1
",
    );
    let node = Node::start(&bridge, "node1", "10.0.0.2", &dir, &run);
    veth_pair(&node.ns, "eth1", &frr_ns, "eth1");
    node.ns.add_addr("eth1", "10.0.3.2/24");
    frr_ns.add_addr("eth1", "10.0.3.1/24");
    wait_until("the route at FRR", T, Duration::from_millis(200), || {
        let v = frr.vtysh_json("show bgp ipv4 unicast 198.51.100.10/32 json");
        v["paths"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
            .then_some(())
    })
    .unwrap_or_else(|e| {
        node.dump_log();
        panic!("{e}")
    });
    let sockets = node
        .ns
        .run(["ss", "-Htn", "state", "established", "dst", "10.0.3.1"]);
    assert!(sockets.contains("10.0.3.2%eth1:"), "{sockets}");
}

/// Two BGPPeers over two unnumbered links (`interface`), the first with
/// a TCP MD5 password, a dual-stack pool and one IPv4 and one IPv6
/// service.
const UNNUMBERED_METALLB: &str = "apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec:
  addresses: [198.51.100.0/24, 2001:db8:100::/120]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: link1, namespace: metallb-system}
spec:
  myASN: 64512
  peerASN: 64500
  interface: eth1
  password: s3cret
  holdTime: 9s
  connectTime: 1s
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: link2, namespace: metallb-system}
spec:
  myASN: 64512
  peerASN: 64500
  interface: eth2
  holdTime: 9s
  connectTime: 1s
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: adv, namespace: metallb-system}
spec:
  ipAddressPools: [pool]
";

const UNNUMBERED_SERVICES: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec: {type: LoadBalancer, externalTrafficPolicy: Cluster}
status:
  loadBalancer:
    ingress: [{ip: 198.51.100.10}]
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
    nodeName: node1
    conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata: {name: web6, namespace: demo}
spec: {type: LoadBalancer, externalTrafficPolicy: Cluster, ipFamilies: [IPv6]}
status:
  loadBalancer:
    ingress: [{ip: '2001:db8:100::10'}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web6-1
  namespace: demo
  labels: {kubernetes.io/service-name: web6}
addressType: IPv6
endpoints:
  - addresses: ['fd00::5']
    nodeName: node1
    conditions: {ready: true}
";

/// FRR as the FRR documentation configures BGP unnumbered: `neighbor
/// IFACE interface remote-as external`, extended next hops, both
/// families, multipath, a TCP MD5 password on eth1; `passive` on both
/// links when `passive`. zebra
/// sends RAs on both links (bgpd asks for them anyway for interface
/// peers; the interval is set so our speaker learns FRR's address within
/// a second).
///
/// With `kernel_nexthops` off (`no zebra nexthop kernel enable`), zebra
/// installs routes with their next hops inline, and an IPv4 route with
/// an IPv6 link-local next hop as `via 169.254.0.1 onlink` plus a
/// permanent neighbour entry for 169.254.0.1 with the peer's MAC; on, as
/// kernel nexthop objects, `via inet6 fe80::...` (RFC 5549 routes, Linux
/// 5.2+). The link flap test needs it off: FRR 8.4's zebra keeps a
/// multipath nexthop group as installed after the kernel dropped a member
/// whose link went down, so after the flap the kernel route kept one next
/// hop while zebra showed two (seen here: `ip nexthop` group 10 = 6 only,
/// `show nexthop-group rib` 10 = 6, 11, "Installed").
fn unnumbered_frr(passive: bool, kernel_nexthops: bool) -> [(&'static str, String); 2] {
    let mut zebra = String::new();
    if !kernel_nexthops {
        zebra.push_str("no zebra nexthop kernel enable\n");
    }
    zebra.push_str(
        "interface eth1
 ipv6 nd ra-interval 1
 no ipv6 nd suppress-ra
interface eth2
 ipv6 nd ra-interval 1
 no ipv6 nd suppress-ra
",
    );
    let mut bgpd = String::from(
        "
router bgp 64500
 bgp router-id 10.0.0.1
 no bgp ebgp-requires-policy
 bgp log-neighbor-changes
",
    );
    for link in ["eth1", "eth2"] {
        bgpd.push_str(&format!(
            " neighbor {link} interface remote-as external\n \
             neighbor {link} capability extended-nexthop\n \
             neighbor {link} timers connect 1\n"
        ));
        if passive {
            bgpd.push_str(&format!(" neighbor {link} passive\n"));
        }
    }
    bgpd.push_str(" neighbor eth1 password s3cret\n");
    bgpd.push_str(
        " address-family ipv4 unicast
  maximum-paths 8
 exit-address-family
 address-family ipv6 unicast
  neighbor eth1 activate
  neighbor eth2 activate
  maximum-paths 8
 exit-address-family
",
    );
    [("zebra", zebra), ("bgpd", bgpd)]
}

/// The unnumbered lab: a node joined to FRR by two veth links (`eth1`,
/// `eth2` on both sides) that have only their IPv6 link-local addresses.
struct UnnumberedLab {
    frr: Frr,
    node: Node,
    /// When the speaker was started.
    started: std::time::Instant,
    _run: RunDir,
}

impl UnnumberedLab {
    /// With `frr_connects`, our SYNs to port 179 are refused (nftables in
    /// the node's namespace), so every session is one FRR opened; else
    /// FRR is `passive`, so every session is one we opened.
    /// `kernel_nexthops`: see [`unnumbered_frr`].
    fn new(tag: &str, frr_connects: bool, kernel_nexthops: bool) -> Self {
        testnet::require_root();
        let run = RunDir::new(&format!("speaker-{tag}"));
        let dir = config_dir(&run, "bgp");
        std::fs::write(dir.join("metallb.yaml"), UNNUMBERED_METALLB).unwrap();
        std::fs::write(dir.join("services.yaml"), UNNUMBERED_SERVICES).unwrap();
        let node_ns = Netns::new(&format!("{tag}n"));
        let frr_ns = Netns::new(&format!("{tag}r"));
        for link in ["eth1", "eth2"] {
            veth_pair(&node_ns, link, &frr_ns, link);
        }
        if frr_connects {
            let nft = "table inet unnumbered {
  chain out {
    type filter hook output priority 0;
    tcp dport 179 tcp flags syn reject with tcp reset
  }
}
";
            let rules = run.join("nft.conf");
            std::fs::write(&rules, nft).unwrap();
            node_ns.run(["nft", "-f", rules.to_str().unwrap()]);
        }
        let daemons = unnumbered_frr(!frr_connects, kernel_nexthops);
        let frr = Frr::start_daemons(
            &frr_ns,
            &[("zebra", &daemons[0].1), ("bgpd", &daemons[1].1)],
        );
        let started = std::time::Instant::now();
        let node = Node::spawn(
            node_ns,
            "node1",
            &dir,
            &run,
            &["--bgp-listen", "[::]:179"],
            None,
        );
        Self {
            frr,
            node,
            started,
            _run: run,
        }
    }

    fn fail(&self, e: impl std::fmt::Display) -> ! {
        self.node.dump_log();
        for cmd in [
            "show bgp ipv4 unicast json",
            "show bgp ipv6 unicast json",
            "show ip route json",
        ] {
            eprintln!("{cmd}: {:#}", self.frr.vtysh_json(cmd));
        }
        eprintln!("{}", self.frr.netns().run(["ip", "-4", "route"]));
        eprintln!("{}", self.frr.netns().run(["ip", "-6", "route"]));
        panic!("{e}")
    }

    /// FRR's state of the session on `link`.
    fn neighbor(&self, link: &str) -> Value {
        self.frr
            .vtysh_json(&format!("show bgp neighbors {link} json"))[link]
            .clone()
    }

    /// The route to `prefix` in FRR's kernel table, as `ip route` prints
    /// it, once it has a next hop on exactly `links`. [`T`] only bounds a
    /// failure: measured, both links' routes are in 0.7-2.2 s after the
    /// speaker starts, and back 0.45-0.93 s after a link comes up (1.1-2.4
    /// s with the machine loaded by `stress-ng --cpu 2` or a build; 3.4 and
    /// 3.1 s at a load average of 17 on 2 cores).
    fn wait_fib(&self, prefix: &str, links: &[&str]) -> String {
        let v6 = prefix.contains(':');
        wait_until(
            &format!("{prefix} in FRR's kernel table via {links:?}"),
            T,
            Duration::from_millis(100),
            || {
                let family = if v6 { "-6" } else { "-4" };
                let r = self
                    .frr
                    .netns()
                    .run(["ip", family, "route", "show", prefix]);
                let via: Vec<&str> = ["eth1", "eth2"]
                    .into_iter()
                    .filter(|l| r.contains(&format!("dev {l}")))
                    .collect();
                (via == links && r.contains("proto bgp")).then_some(r)
            },
        )
        .unwrap_or_else(|e| self.fail(e))
    }
}

/// The routes of a dual-stack service pair over two unnumbered links, as
/// FRR installs them: both services, each with a next hop on each link
/// that is us: for IPv6 our link-local address on that link; for IPv4
/// (RFC 8950) the same through `via inet6`, or 169.254.0.1 whose
/// neighbour entry is our MAC on that link (see [`unnumbered_frr`]).
fn assert_unnumbered_ecmp(lab: &UnnumberedLab) {
    let v4 = lab.wait_fib("198.51.100.10", &["eth1", "eth2"]);
    let v6 = lab.wait_fib("2001:db8:100::10", &["eth1", "eth2"]);
    let paths = lab
        .frr
        .vtysh_json("show bgp ipv4 unicast 198.51.100.10/32 json");
    let paths = paths["paths"].as_array().cloned().unwrap_or_default();
    assert_eq!(paths.len(), 2, "{paths:#?}");
    for link in ["eth1", "eth2"] {
        let n = lab.neighbor(link);
        assert_eq!(n["bgpState"], "Established", "{n:#}");
        assert_eq!(n["remoteAs"], 64512, "{n:#}");
        let enh = &n["neighborCapabilities"]["extendedNexthop"];
        assert!(
            enh.as_str()
                .is_some_and(|s| s.contains("advertisedAndReceived")),
            "{n:#}"
        );
        let ours = n["hostForeign"].as_str().unwrap_or_default().to_owned();
        assert!(ours.starts_with("fe80::"), "{n:#}");
        lab.assert_next_hop_is_us(&v4, link, &ours);
        lab.assert_next_hop_is_us(&v6, link, &ours);
    }
}

impl UnnumberedLab {
    /// The next hop on `link` of a route `ip route` printed is our
    /// link-local address `ours` on that link, or 169.254.0.1 resolving to
    /// our MAC there.
    fn assert_next_hop_is_us(&self, route: &str, link: &str, ours: &str) {
        let line = route
            .lines()
            .find(|l| l.contains(&format!("dev {link} ")))
            .unwrap_or_else(|| panic!("no next hop on {link}: {route}"));
        if line.contains(&format!("via {ours} ")) || line.contains(&format!("via inet6 {ours} ")) {
            return;
        }
        assert!(line.contains("via 169.254.0.1 "), "{route}");
        let neigh = self
            .frr
            .netns()
            .run(["ip", "neigh", "show", "169.254.0.1", "dev", link]);
        let link_info = self.node.ns.run(["ip", "-o", "link", "show", link]);
        let mac = link_info
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .unwrap_or_default();
        assert!(
            !mac.is_empty()
                && neigh.contains(&format!("lladdr {mac} "))
                && neigh.contains("PERMANENT"),
            "169.254.0.1 on {link} is not our {mac}: {neigh}"
        );
    }
}

/// BGP unnumbered peering (issue 20 §1) with FRR configured `neighbor
/// IFACE interface remote-as external`, FRR `passive`, so we open both
/// sessions to the addresses learned from FRR's Router Advertisements
/// (FRR learns ours from ours): the IPv4 and the IPv6 service are in
/// FRR's kernel table with a next hop on each link (ECMP), the IPv4 one
/// via an IPv6 link-local next hop. One link goes down: its routes are
/// withdrawn and the session ends, the other link keeps its; it comes back
/// up: so do the session and the next hops.
#[test]
fn unnumbered_ecmp_and_link_flap_with_frr_passive() {
    let lab = UnnumberedLab::new("unp", false, false);
    assert_unnumbered_ecmp(&lab);
    let first = lab.started.elapsed();
    // zebra without kernel nexthop objects: the proxy neighbour form.
    let v4 = fib(lab.frr.netns(), "198.51.100.10");
    assert_eq!(v4.matches("via 169.254.0.1 ").count(), 2, "{v4}");
    for link in ["eth1", "eth2"] {
        // FRR passive: it accepted the connection on port 179.
        let n = lab.neighbor(link);
        assert_eq!(n["portLocal"], 179, "{n:#}");
        let host = n["hostForeign"].as_str().unwrap_or_default();
        assert!(host.starts_with("fe80::"), "{n:#}");
    }

    // eth2 goes down on our side (FRR's end loses its carrier).
    let down = std::time::Instant::now();
    lab.node.ns.ip(["link", "set", "eth2", "down"]);
    lab.wait_fib("198.51.100.10", &["eth1"]);
    lab.wait_fib("2001:db8:100::10", &["eth1"]);
    let withdrawn = down.elapsed();
    assert_eq!(lab.neighbor("eth1")["bgpState"], "Established");
    // And up again: the neighbor is learned anew and the session opened.
    let up = std::time::Instant::now();
    lab.node.ns.link_up("eth2");
    assert_unnumbered_ecmp(&lab);
    let back = up.elapsed();
    eprintln!(
        "unnumbered, FRR passive: routes in {} ms after the speaker started; \
         link flap: withdrawn {} ms after link down, back {} ms after link up",
        first.as_millis(),
        withdrawn.as_millis(),
        back.as_millis()
    );
    assert_eq!(
        lab.node.metric("ferrolb_bgp_peer_config_errors_total"),
        Some(0)
    );
}

/// BGP unnumbered peering the other way: our SYNs are refused, so both
/// sessions are ones FRR opened to the address it learned from our Router
/// Advertisements, accepted by our listener (`--bgp-listen [::]:179`) and
/// matched to the BGPPeer of the interface they came in on. The same
/// routes are installed.
#[test]
fn unnumbered_sessions_frr_opens() {
    let lab = UnnumberedLab::new("una", true, true);
    assert_unnumbered_ecmp(&lab);
    // zebra with kernel nexthop objects: the IPv4 route is an RFC 5549 one.
    let v4 = fib(lab.frr.netns(), "198.51.100.10");
    assert_eq!(v4.matches("via inet6 fe80::").count(), 2, "{v4}");
    eprintln!(
        "unnumbered, FRR connects: routes in {} ms after the speaker started",
        lab.started.elapsed().as_millis()
    );
    for link in ["eth1", "eth2"] {
        let n = lab.neighbor(link);
        assert_eq!(n["portForeign"], 179, "FRR connected to us: {n:#}");
    }
}

/// Floods ARP requests for TARGET from this interface's own MAC at RATE
/// frames/s until STOPFILE exists, then prints how many it sent:
/// `python3 -c FLOODER IFACE TARGET RATE STOPFILE`.
const FLOODER: &str = r#"
import os, socket, sys, time
iface, target, rate, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
mac = s.getsockname()[4]
frame = b"\xff" * 6 + mac + b"\x08\x06\x00\x01\x08\x00\x06\x04\x00\x01" + mac \
    + socket.inet_aton("10.0.0.20") + b"\x00" * 6 + socket.inet_aton(target)
batch = rate // 100
sent, tick = 0, time.monotonic()
while not os.path.exists(stop):
    for _ in range(batch):
        try:
            s.send(frame)
            sent += 1
        except BlockingIOError:
            pass
    tick += 0.01
    d = tick - time.monotonic()
    if d > 0:
        time.sleep(d)
print(sent)
"#;

/// A host flooding ARP requests for an announced address (up to 100k/s,
/// from its one MAC) gets its budget of answers and no more, counted as
/// `ferrolb_layer2_dropped_total{reason="rate_limited"}`, while another
/// host's requests for the same address are all answered.
///
/// Bounds come from the speaker's counters, not the clock, so the test
/// holds on a loaded machine: the probes start once the speaker has
/// rate-limited [`FLOOD_LIMITED`] of the flood's requests (at whatever rate
/// the flooder reached), and the flood must still be counted as limited
/// after them. Each probe is retried once a second; its deadline only
/// bounds a failure.
#[test]
fn layer2_flood_from_one_sender_is_rate_limited_and_others_are_answered() {
    /// Flood requests the speaker must have rate-limited before the probes.
    const FLOOD_LIMITED: u64 = 20_000;
    /// Requests from the client during the flood.
    const PROBES: usize = 20;
    testnet::require_root();
    testnet::require_binary("arping");
    testnet::require_binary("python3");
    let run = RunDir::new("speaker-l2-flood");
    let dir = config_dir(&run, "l2");
    // One node: it wins the election.
    std::fs::write(
        dir.join("cluster.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus:\n  addresses: [{type: InternalIP, address: 10.0.0.2}]\n\
         ---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: demo}\nspec: {type: LoadBalancer}\n\
         status: {loadBalancer: {ingress: [{ip: 10.0.0.100}]}}\n---\napiVersion: discovery.k8s.io/v1\n\
         kind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: demo\n  labels: {kubernetes.io/service-name: web}\n\
         addressType: IPv4\nendpoints:\n  - addresses: [10.244.1.5]\n    nodeName: node1\n",
    )
    .unwrap();
    let bridge = Bridge::new("flan");
    let client = Netns::new("fclient");
    bridge.attach(&client, "eth0");
    client.add_addr("eth0", "10.0.0.10/24");
    let flooder = Netns::new("flooder");
    bridge.attach(&flooder, "eth0");
    flooder.add_addr("eth0", "10.0.0.20/24");
    let node = Node::start(&bridge, "node1", "10.0.0.2", &dir, &run);
    let fail = |e: &dyn std::fmt::Display| -> ! {
        node.dump_log();
        panic!("{e}")
    };
    let answered = || {
        client
            .exec(["arping", "-c", "1", "-w", "1", "-I", "eth0", "10.0.0.100"])
            .status
            .success()
    };
    wait_until("a first ARP answer", T, Duration::from_millis(100), || {
        answered().then_some(())
    })
    .unwrap_or_else(|e| fail(&e));
    let metric = |m: &str, line: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or(0)
    };
    let limited = |m: &str| metric(m, "ferrolb_layer2_dropped_total{reason=\"rate_limited\"} ");
    let responses = |m: &str| metric(m, "metallb_layer2_responses_sent{ip=\"10.0.0.100\"} ");
    let kernel = |m: &str| metric(m, "ferrolb_layer2_dropped_total{reason=\"kernel\"} ");

    let stop = run.join("flood-stop");
    let argv: Vec<String> = vec![
        "python3".into(),
        "-c".into(),
        FLOODER.into(),
        "eth0".into(),
        "10.0.0.100".into(),
        "100000".into(),
        stop.display().to_string(),
    ];
    let flood = {
        let flooder = flooder.clone();
        std::thread::spawn(move || flooder.run(&argv))
    };
    // The flooder stops when the file appears, also if an assertion fails.
    struct Stop(PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.0, b"");
        }
    }
    let stop = Stop(stop);
    let started = wait_until(
        "the speaker to rate-limit the flood",
        T,
        Duration::from_millis(200),
        || {
            let m = node.metrics();
            (limited(&m) >= FLOOD_LIMITED).then_some(m)
        },
    )
    .unwrap_or_else(|e| fail(&e));
    // Each probe: one request a second until answered, at most 20.
    let tries: Vec<Option<usize>> = (0..PROBES).map(|_| (1..=20).find(|_| answered())).collect();
    let ended = node.metrics();
    drop(stop);
    let sent: u64 = flood.join().unwrap().trim().parse().unwrap();
    eprintln!(
        "flood: sent {sent}; probes answered at try {tries:?}; during the probes: rate limited {}, \
         responses {}, kernel drops {}",
        limited(&ended) - limited(&started),
        responses(&ended) - responses(&started),
        kernel(&ended) - kernel(&started),
    );
    if tries.iter().any(Option::is_none) {
        fail(&format!(
            "the client's requests went unanswered during the flood: {tries:?}"
        ));
    }
    // The flood went on during the probes, and was limited, not answered:
    // the flooder's answers are its budget, far below what it asked for.
    let limited_during = limited(&ended) - limited(&started);
    let answered_during = responses(&ended) - responses(&started);
    assert!(
        limited_during > 0,
        "no flood request was rate-limited during the probes"
    );
    assert!(
        answered_during < limited_during,
        "the flood was answered, not limited: {answered_during} answers, {limited_during} limited"
    );
}
