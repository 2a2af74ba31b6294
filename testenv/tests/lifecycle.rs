//! Starting and stopping environments, cleanup when a test binary exits, and
//! test binaries running side by side.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::{Component, Pids, TestEnv};

#[tokio::test]
async fn start_and_stop() {
    let env = TestEnv::start().unwrap();
    let pids = env.pids();
    let run_dir = env.run_dir().to_owned();
    assert!(all_pids(pids).iter().all(|&pid| alive(pid)));

    let version = env.client().unwrap().apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "36")
    );
    assert!(version.git_version.starts_with("v1.36."), "{version:?}");

    env.stop().unwrap();
    assert!(!run_dir.exists(), "{} is left", run_dir.display());
    for pid in all_pids(pids) {
        assert!(!alive(pid), "pid {pid} is still running");
    }
}

/// A killed apiserver or etcd is a crash the environment survives: the
/// supervisor keeps running, `restart` brings the process back on the same
/// port, and etcd comes back with its data.
#[tokio::test]
async fn killed_components_restart_with_their_data() {
    let env = TestEnv::start().unwrap();
    let ns = env.fresh_namespace("restart").await.unwrap();
    let maps = |client: kube::Client| Api::<ConfigMap>::namespaced(client, &ns);
    let map = |name: &str| {
        serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}})).unwrap()
    };
    maps(env.client().unwrap())
        .create(&PostParams::default(), &map("before"))
        .await
        .unwrap();
    let first = env.pids();

    env.kill(Component::Apiserver).unwrap();
    assert!(!alive(first.apiserver), "the apiserver survived SIGKILL");
    assert_eq!(env.pids().apiserver, 0);
    assert!(alive(first.supervise) && alive(first.etcd));
    let refused = maps(env.client().unwrap()).get("before").await;
    assert!(refused.is_err(), "a killed apiserver answered: {refused:?}");
    env.restart(Component::Apiserver).unwrap();
    let second = env.pids();
    assert!(
        second.apiserver != 0 && second.apiserver != first.apiserver && alive(second.apiserver)
    );
    // Same URL and credentials: a client made before the kill works again.
    maps(env.client().unwrap()).get("before").await.unwrap();

    env.kill(Component::Etcd).unwrap();
    assert!(!alive(first.etcd), "etcd survived SIGKILL");
    assert!(
        alive(second.apiserver),
        "the apiserver must outlive its etcd"
    );
    env.restart(Component::Etcd).unwrap();
    let third = env.pids();
    assert!(third.etcd != 0 && third.etcd != first.etcd && alive(third.etcd));
    // The apiserver reconnects by itself; the object written before both
    // crashes is still there, and writes work again.
    let client = env.client().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match maps(client.clone())
            .create(&PostParams::default(), &map("after"))
            .await
        {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("apiserver not writable yet after the etcd restart: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("no write within 60 s of etcd's restart: {e}"),
        }
    }
    maps(client).get("before").await.unwrap();

    let run_dir = env.run_dir().to_owned();
    env.stop().unwrap();
    assert!(!run_dir.exists());
    assert!(all_pids(third).iter().all(|&pid| !alive(pid)));
}

#[tokio::test]
async fn drop_stops_too() {
    let env = TestEnv::start().unwrap();
    let pids = env.pids();
    let run_dir = env.run_dir().to_owned();
    drop(env);
    assert!(!run_dir.exists());
    assert!(all_pids(pids).iter().all(|&pid| !alive(pid)));
}

/// Two test binaries, each with its own global environment, run at the same
/// time without sharing ports or directories, and each leaves nothing behind
/// when it exits without stopping its environment.
#[test]
fn parallel_test_binaries_do_not_collide() {
    let rendezvous =
        std::env::temp_dir().join(format!("ferrolb-testenv-parallel-{}", std::process::id()));
    std::fs::create_dir_all(&rendezvous).unwrap();
    let spawn = |id: &str| {
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_test_binary", "--ignored", "--nocapture"])
            .env(CHILD_DIR, &rendezvous)
            .env(CHILD_ID, id)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children = [spawn("a"), spawn("b")];
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for output in &outputs {
        assert!(
            output.status.success(),
            "a child test binary failed with {}:\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let a = ChildInfo::read(&rendezvous.join("a"));
    let b = ChildInfo::read(&rendezvous.join("b"));
    std::fs::remove_dir_all(&rendezvous).unwrap();
    assert_ne!(a.server, b.server, "both used one apiserver port");
    assert_ne!(a.etcd, b.etcd, "both used one etcd port");
    assert_ne!(a.run_dir, b.run_dir);

    // Neither child stopped its environment: the supervisors noticed their
    // parent exit and cleaned up. The wait is for the processes: a supervisor
    // removes its run directory before it exits, so once every process is
    // gone the directories must be too (kube-apiserver's graceful stop alone
    // took over 30 s while other test binaries loaded both cores; the
    // deadline only keeps a hung process from hanging the test).
    let deadline = Instant::now() + Duration::from_secs(90);
    let running = || -> Vec<u32> {
        [&a, &b]
            .iter()
            .flat_map(|info| all_pids(info.pids))
            .filter(|&pid| alive(pid))
            .collect()
    };
    while !running().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(running(), Vec::<u32>::new(), "still running after 90 s");
    let left: Vec<String> = [&a.run_dir, &b.run_dir]
        .iter()
        .filter(|d| d.exists())
        .map(|d| d.display().to_string())
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "run directories left behind by supervisors that exited"
    );
}

/// One of the two test binaries of [`parallel_test_binaries_do_not_collide`]:
/// starts the global environment, uses it, reports it, waits for its sibling
/// to be up too, then exits without stopping anything.
#[tokio::test]
#[ignore = "run as a child process by parallel_test_binaries_do_not_collide"]
async fn child_test_binary() {
    let env = TestEnv::global();
    let ns = env.fresh_namespace("child").await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client().unwrap(), &ns);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "hello"}})).unwrap();
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    let (Ok(dir), Ok(id)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_ID)) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let state = std::fs::read_to_string(env.run_dir().join("state")).unwrap();
    let etcd = state.lines().find_map(|l| l.strip_prefix("ETCD=")).unwrap();
    let pids = env.pids();
    let info = format!(
        "{}\n{}\n{}\n{} {} {}\n",
        env.server_url(),
        etcd,
        env.run_dir().display(),
        pids.supervise,
        pids.etcd,
        pids.apiserver
    );
    let tmp = dir.join(format!("{id}.tmp"));
    std::fs::write(&tmp, info).unwrap();
    std::fs::rename(&tmp, dir.join(&id)).unwrap();

    // Stay up until the sibling is up, so both environments overlap.
    let sibling = dir.join(if id == "a" { "b" } else { "a" });
    let deadline = Instant::now() + Duration::from_secs(180);
    while !sibling.exists() {
        assert!(
            Instant::now() < deadline,
            "the sibling test binary never came up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn missing_binaries_fail_with_a_clear_message() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("supervise");
    let run_dir =
        std::env::temp_dir().join(format!("ferrolb-testenv-missing-{}", std::process::id()));
    let output = Command::new(script)
        .arg(&run_dir)
        .env("FERROLB_TESTENV_BIN", "/nonexistent/testenv-bin")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/testenv-bin/"), "{stderr}");
    assert!(stderr.contains("testenv/build"), "{stderr}");
    assert!(!run_dir.exists());

    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("build");
    let empty = std::env::temp_dir().join(format!(
        "ferrolb-testenv-empty-cache-{}",
        std::process::id()
    ));
    let output = Command::new(build)
        .arg("--check")
        .env("FERROLB_TESTENV_CACHE", &empty)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("are not built") && stderr.contains("run testenv/build"),
        "{stderr}"
    );
}

/// What a child test binary reports about its environment.
struct ChildInfo {
    server: String,
    etcd: String,
    run_dir: PathBuf,
    pids: Pids,
}

impl ChildInfo {
    fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let pids: Vec<u32> = lines[3].split(' ').map(|p| p.parse().unwrap()).collect();
        Self {
            server: lines[0].to_owned(),
            etcd: lines[1].to_owned(),
            run_dir: PathBuf::from(lines[2]),
            pids: Pids {
                supervise: pids[0],
                etcd: pids[1],
                apiserver: pids[2],
            },
        }
    }
}

fn all_pids(pids: Pids) -> [u32; 3] {
    [pids.supervise, pids.etcd, pids.apiserver]
}

/// Whether `pid` runs; a zombie waiting to be reaped by init counts as gone.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

const CHILD_DIR: &str = "FERROLB_TESTENV_CHILD_DIR";
const CHILD_ID: &str = "FERROLB_TESTENV_CHILD_ID";
