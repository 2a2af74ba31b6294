//! The secure metrics of a real program (speaker or controller) scraped
//! as MetalLB's ServiceMonitor scrapes them (`scheme: https`,
//! `insecureSkipVerify: true`, a service account's bearer token), against
//! testenv's real apiserver: a reader whose service account may `get`
//! the non-resource URL `/metrics` gets the metrics, one that may not gets
//! 403, no token or a bad one 401, and repeated scrapes are answered from
//! the cache (the program's own `ferrolb_secure_metrics_reviews_total`
//! does not move).
//!
//! Included with `#[path]` next to `hostile.rs` and `https.rs`.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use testenv::TestEnv;

use super::hostile::Process;
use super::https;

/// Two readers' tokens in a namespace of their own; the namespace and the
/// cluster-wide role and binding are deleted on drop (also when the test
/// fails).
pub struct Readers {
    pub ns: String,
    /// May `get` /metrics.
    pub allowed: String,
    /// A valid token whose user may not.
    pub denied: String,
}

impl Readers {
    /// Creates the namespace, the service accounts `prom-allowed` and
    /// `prom-denied`, the ClusterRole `<ns>-metrics-reader` (get on the
    /// non-resource URL /metrics, as MetalLB's chart grants its
    /// PodMonitor's account) bound to `prom-allowed`, and a token of each.
    pub fn new(env: &TestEnv, prefix: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ns = rt.block_on(env.fresh_namespace(prefix)).unwrap();
        let mut readers = Self {
            ns: ns.clone(),
            allowed: String::new(),
            denied: String::new(),
        };
        kubectl_apply(
            env,
            &format!(
                "apiVersion: v1
kind: ServiceAccount
metadata: {{name: prom-allowed, namespace: {ns}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: prom-denied, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-metrics-reader}}
rules:
  - nonResourceURLs: [/metrics]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-metrics-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-metrics-reader}}
subjects: [{{kind: ServiceAccount, name: prom-allowed, namespace: {ns}}}]
"
            ),
        );
        readers.allowed = token(env, &ns, "prom-allowed");
        readers.denied = token(env, &ns, "prom-denied");
        readers
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        let name = format!("{}-metrics-reader", self.ns);
        let _ = TestEnv::global()
            .kubectl()
            .args(["delete", "--ignore-not-found", "--wait=false"])
            .arg(format!("clusterrolebinding/{name}"))
            .arg(format!("clusterrole/{name}"))
            .arg(format!("namespace/{}", self.ns))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn kubectl_apply(env: &TestEnv, yaml: &str) {
    let mut child = env
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A token of `sa` from the TokenRequest API.
pub fn token(env: &TestEnv, ns: &str, sa: &str) -> String {
    let out = env
        .kubectl()
        .args(["create", "token", sa, "-n", ns, "--duration=1h"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A port free on every address now (the program binds `[::]:port`).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("[::]:0")
        .or_else(|_| std::net::TcpListener::bind("0.0.0.0:0"))
        .unwrap();
    l.local_addr().unwrap().port()
}

/// What the program's `secure metrics server listening` line reports.
#[derive(Debug, Clone, Copy)]
pub struct Listener {
    /// Its address, on loopback.
    pub addr: SocketAddr,
    /// How long it remembers a refusal.
    pub denied_ttl: Duration,
}

/// Waits for the program's `secure metrics server listening` line.
pub fn secure_listener(p: &mut Process, within: Duration) -> Listener {
    let deadline = Instant::now() + within;
    loop {
        if let Some(f) = p.logged("secure metrics server listening").pop() {
            let addr: SocketAddr = f["addr"].as_str().unwrap().parse().unwrap();
            return Listener {
                addr: SocketAddr::from(([127, 0, 0, 1], addr.port())),
                denied_ttl: Duration::from_millis(f["cache_denied_ttl_ms"].as_u64().unwrap()),
            };
        }
        if !p.alive() || Instant::now() > deadline {
            p.dump_log();
            panic!("no `secure metrics server listening` line");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of the sample `line_start` (a name with its labels) in an
/// exposition text.
pub fn sample(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Checks an exposition text line by line: comments are `# HELP name
/// text` or `# TYPE name kind`, and each sample is `name{labels} value`
/// with a float value and a family declared before it. Returns the
/// samples.
pub fn parse(text: &str) -> usize {
    let mut typed = std::collections::BTreeSet::new();
    let mut samples = 0;
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            typed.insert(name.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        value
            .parse::<f64>()
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}"
        );
        assert!(
            typed.contains(name) || typed.iter().any(|t| name.starts_with(t.as_str())),
            "{line}: no TYPE before it"
        );
        if let Some(labels) = series.strip_prefix(name) {
            assert!(
                labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                "{line}"
            );
        }
        samples += 1;
    }
    samples
}

/// What [`scrape_as_metallb`] measured.
#[derive(Debug)]
pub struct Figures {
    /// Samples in an allowed scrape.
    pub samples: usize,
    /// TokenReview + SubjectAccessReview calls the program made, after the
    /// first scrape of each reader.
    pub reviews: f64,
    /// Scrapes answered from the cache.
    pub cache_hits: f64,
    /// How long the first allowed scrape (reviews included) and a cached
    /// one took.
    pub first: Duration,
    pub cached: Duration,
}

/// Scrapes `addr` as a ServiceMonitor would, and checks the answers;
/// `family` must be in the metrics.
pub async fn scrape_as_metallb(listener: Listener, readers: &Readers, family: &str) -> Figures {
    let addr = listener.addr;
    let client: Arc<ClientConfig> = https::client(https::Trust::Any, false);
    let get = |token: Option<&str>| {
        let client = Arc::clone(&client);
        let token = token.map(str::to_owned);
        async move {
            https::get(&client, addr, "/metrics", token.as_deref())
                .await
                .unwrap()
        }
    };
    let (code, r) = get(None).await;
    assert_eq!(code, 401, "no token: {r}");
    let (code, r) = get(Some("not-a-token")).await;
    assert_eq!(code, 401, "a bad token: {r}");
    let (code, r) = get(Some(&readers.denied)).await;
    assert_eq!(code, 403, "a reader without get on /metrics: {r}");
    assert!(
        r.contains(&format!("system:serviceaccount:{}:prom-denied", readers.ns)),
        "{r}"
    );
    let t0 = Instant::now();
    let (code, r) = get(Some(&readers.allowed)).await;
    let first = t0.elapsed();
    assert_eq!(code, 200, "a reader with get on /metrics: {r}");
    let text = https::body(&r).to_owned();
    let samples = parse(&text);
    assert!(
        text.contains(&format!("# TYPE {family} ")),
        "{family} missing:\n{text}"
    );
    // Every reader has been reviewed once; from now on the cache answers.
    let reviews = sample(&text, "ferrolb_secure_metrics_reviews_total").unwrap();
    let mut cached = Duration::ZERO;
    let mut last = String::new();
    let looped = Instant::now();
    for _ in 0..5 {
        let t0 = Instant::now();
        let (code, r) = get(Some(&readers.allowed)).await;
        cached = t0.elapsed();
        assert_eq!(code, 200);
        assert_eq!(get(Some(&readers.denied)).await.0, 403);
        last = https::body(&r).to_owned();
    }
    // No API call, unless the loop outlived the refusal's TTL (as the
    // program reports it): then one review (two calls) per expiry.
    let looped = looped.elapsed();
    let expiries = (looped.as_secs_f64() / listener.denied_ttl.as_secs_f64()).floor();
    let after = sample(&last, "ferrolb_secure_metrics_reviews_total").unwrap();
    assert!(
        after - reviews <= 2.0 * expiries,
        "repeated scrapes called the API {} times in {looped:?}:\n{last}",
        after - reviews
    );
    let cache_hits = sample(&last, "ferrolb_secure_metrics_cache_hits_total").unwrap();
    // Five allowed and four refused scrapes from the cache, but for a
    // refusal reviewed again after its TTL.
    assert!(cache_hits + (after - reviews) / 2.0 >= 9.0, "{last}");
    // The counters report each verdict (the last scrape's own is counted
    // before its text is made).
    assert_eq!(
        sample(
            &last,
            "ferrolb_secure_metrics_requests_total{result=\"forbidden\"}"
        ),
        Some(5.0),
        "{last}"
    );
    assert_eq!(
        sample(
            &last,
            "ferrolb_secure_metrics_requests_total{result=\"allowed\"}"
        ),
        Some(6.0),
        "{last}"
    );
    assert_eq!(
        sample(
            &last,
            "ferrolb_secure_metrics_requests_total{result=\"unauthenticated\"}"
        ),
        Some(2.0),
        "{last}"
    );
    Figures {
        samples,
        reviews,
        cache_hits,
        first,
        cached,
    }
}

/// Runs `bin args` and waits for it to exit (within `within`): its exit
/// status and standard error.
pub fn run_to_exit(bin: &str, args: &[&str], within: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read as _;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{bin} did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
