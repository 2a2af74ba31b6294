//! Namespaces, veth pairs, bridges and cleanup: after a normal drop, after a
//! panic, and after the test process itself is killed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use testnet::{Bird, Bridge, Netns, Proc, veth_pair, wait_until};

#[test]
fn veth_ping_and_cleanup() {
    let a = Netns::new("a");
    let b = Netns::new("b");
    veth_pair(&a, "a0", &b, "b0");
    a.add_addr("a0", "10.0.0.1/24");
    b.add_addr("b0", "10.0.0.2/24");
    a.add_addr("a0", "fd00::1/64");
    b.add_addr("b0", "fd00::2/64");
    b.set_mac("b0", "02:00:00:00:00:02");
    assert!(b.ip(["link", "show", "b0"]).contains("02:00:00:00:00:02"));

    a.run(["ping", "-c", "1", "-W", "5", "10.0.0.2"]);
    a.run(["ping", "-c", "1", "-W", "5", "fd00::2"]);
    // IPv6 addresses are usable at once: no DAD, not tentative.
    assert!(!a.ip(["-6", "addr", "show", "a0"]).contains("tentative"));

    let c = Netns::new("c");
    veth_pair(&b, "b1", &c, "c0");
    b.add_addr("b1", "10.0.1.1/24");
    c.add_addr("c0", "10.0.1.2/24");
    b.sysctl("net.ipv4.ip_forward", "1");
    a.add_route("10.0.1.0/24", "10.0.0.2");
    c.add_route("default", "10.0.1.1");
    a.run(["ping", "-c", "1", "-W", "5", "10.0.1.2"]);

    // Nothing of ours is visible outside: the host has no such interfaces.
    let host_links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let host_links = String::from_utf8_lossy(&host_links.stdout);
    assert!(!host_links.contains(" a0") && !host_links.contains(" b0@"));

    let guarded = b.spawn(["sleep", "600"], "/dev/null");
    let guarded_pid = guarded.pid();
    // A child without a guard: the namespace's drop must kill it.
    let mut unguarded = b
        .command("sleep")
        .arg("600")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let names = [
        a.name().to_owned(),
        b.name().to_owned(),
        c.name().to_owned(),
    ];
    for name in &names {
        assert!(netns_list().contains(name), "{name} missing");
    }

    drop(guarded);
    assert!(gone(guarded_pid), "guarded child {guarded_pid} survived");
    drop((a, b, c));
    for name in &names {
        assert!(!netns_list().contains(name), "{name} left behind");
    }
    let status = wait_until(
        "the unguarded child to die",
        Duration::from_secs(5),
        Duration::from_millis(10),
        || unguarded.try_wait().unwrap(),
    )
    .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
}

#[test]
fn bridge_joins_three_namespaces() {
    let bridge = Bridge::new("br");
    let nodes: Vec<Netns> = (1..=3).map(|i| Netns::new(&format!("n{i}"))).collect();
    for (i, node) in nodes.iter().enumerate() {
        bridge.attach(node, "eth0");
        node.add_addr("eth0", &format!("192.168.7.{}/24", i + 1));
        node.add_addr("eth0", &format!("fd00:7::{}/64", i + 1));
    }
    nodes[0].run(["ping", "-c", "1", "-W", "5", "192.168.7.2"]);
    nodes[0].run(["ping", "-c", "1", "-W", "5", "192.168.7.3"]);
    nodes[2].run(["ping", "-c", "1", "-W", "5", "fd00:7::2"]);
    // All three are on one segment: n1 learned both neighbours by ARP.
    let neigh = nodes[0].ip(["neigh", "show", "dev", "eth0"]);
    assert!(
        neigh.contains("192.168.7.2") && neigh.contains("192.168.7.3"),
        "{neigh}"
    );
    let ports = bridge.netns().ip(["-o", "link", "show", "master", "br0"]);
    assert_eq!(ports.lines().count(), 3, "{ports}");
}

/// Sockets made in `run_in` stay in their namespace when used elsewhere.
#[test]
fn run_in_binds_sockets_inside() {
    let a = Netns::new("sa");
    let b = Netns::new("sb");
    veth_pair(&a, "eth0", &b, "eth0");
    a.add_addr("eth0", "10.9.0.1/24");
    b.add_addr("eth0", "10.9.0.2/24");
    let listener = b.run_in(|| TcpListener::bind("10.9.0.2:0").unwrap());
    let addr = listener.local_addr().unwrap();
    let mut client = a.run_in(|| TcpStream::connect(addr).unwrap());
    let (mut server, peer) = listener.accept().unwrap();
    assert_eq!(peer.ip().to_string(), "10.9.0.1");
    client.write_all(b"hi").unwrap();
    let mut buf = [0; 2];
    server.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hi");
    // The test thread itself is still in the host namespace, where neither
    // address exists (checked by binding, which sends nothing).
    for ip in ["10.9.0.1:0", "10.9.0.2:0"] {
        let err = TcpListener::bind(ip).unwrap_err();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::AddrNotAvailable,
            "{ip}: {err}"
        );
    }

    let caught = panic::catch_unwind(|| a.run_in(|| panic!("inside")));
    assert!(caught.is_err());
}

#[test]
fn cleanup_on_panic() {
    let mut seen = None;
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let ns = Netns::new("panic");
        let sleeper = ns.spawn(["sleep", "600"], "/dev/null");
        let mut bird = Bird::start(&ns, "router id 10.0.0.1;\nprotocol device {}\n");
        // The guard's PID is BIRD's own: setpriv and ip netns exec exec, not fork.
        let pid_file = std::fs::read_to_string(bird.dir().join("bird.pid")).unwrap();
        assert_eq!(pid_file.trim(), bird.process().pid().to_string());
        assert_eq!(
            bird.process().label(),
            format!("bird in netns {}", ns.name())
        );
        seen = Some((
            ns.name().to_owned(),
            sleeper.pid(),
            bird.process().pid(),
            bird.dir().to_owned(),
        ));
        panic!("deliberate panic with a namespace, a child and BIRD alive");
    }));
    assert!(result.is_err());
    let (name, sleeper, bird, dir) = seen.unwrap();
    assert!(!netns_list().contains(&name), "{name} left behind");
    assert!(gone(sleeper), "sleep {sleeper} survived");
    assert!(gone(bird), "bird {bird} survived");
    // The run dir stays after a panic, for its logs.
    assert!(dir.join("bird.log").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

/// A test process killed by SIGKILL leaves no namespace and no process: its
/// children die by PR_SET_PDEATHSIG, and the watchdog deletes the namespace
/// and kills what has no death signal (like FRR's daemons after they drop
/// root), by PID.
#[test]
fn killed_test_process_leaks_nothing() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "orphan_child", "--ignored", "--nocapture"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let line = stdout
        .lines()
        .map(Result::unwrap)
        .find(|l| l.starts_with("ORPHAN "))
        .expect("child printed no ORPHAN line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (name, with_sig, without_sig) = (
        fields[1].to_owned(),
        fields[2].parse::<u32>().unwrap(),
        fields[3].parse::<u32>().unwrap(),
    );
    assert!(netns_list().contains(&name));
    assert!(!gone(with_sig) && !gone(without_sig));

    child.kill().unwrap();
    child.wait().unwrap();
    // The watchdog has no deadline of its own; a minute is only where a
    // watchdog that never ran stops the test.
    wait_until(
        "the watchdog to clean up",
        Duration::from_secs(60),
        Duration::from_millis(20),
        || (!netns_list().contains(&name) && gone(with_sig) && gone(without_sig)).then_some(()),
    )
    .unwrap();
}

/// Run by `killed_test_process_leaks_nothing` in a child process.
#[test]
#[ignore = "helper: runs only as a child of killed_test_process_leaks_nothing"]
fn orphan_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let ns = Netns::new("orphan");
    let with_sig = ns.spawn(["sleep", "600"], "/dev/null");
    // No setpriv: no death signal, like a daemon that changed its user ID.
    let without_sig = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sleep", "600"])
        .spawn()
        .unwrap();
    // Printed only once both are inside: `spawn` returns after exec, before
    // `ip netns exec` has entered the namespace, and the watchdog kills what
    // `ip netns pids` lists.
    for pid in [with_sig.pid(), without_sig.id()] {
        wait_until(
            "the sleepers to enter the namespace",
            Duration::from_secs(60),
            Duration::from_millis(10),
            || in_netns(pid, &ns.path()).then_some(()),
        )
        .unwrap();
    }
    println!(
        "ORPHAN {} {} {}",
        ns.name(),
        with_sig.pid(),
        without_sig.id()
    );
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(600));
    let _keep: (Proc, Netns, Child) = (with_sig, ns, without_sig);
}

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The process runs in the namespace mounted at `path` (and has exec'd its
/// final program: `ip netns exec` enters the namespace before exec).
fn in_netns(pid: u32, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let (Ok(ns), Ok(proc_ns)) = (
        std::fs::metadata(path),
        std::fs::metadata(format!("/proc/{pid}/ns/net")),
    ) else {
        return false;
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    (ns.dev(), ns.ino()) == (proc_ns.dev(), proc_ns.ino())
        && exe.file_name().is_some_and(|n| n == "sleep")
}

/// The process is gone or a zombie (reaped later by whoever is its parent).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

const CHILD_ENV: &str = "TESTNET_ORPHAN_CHILD";
